// Package sandboxfs serves a sandbox's workspace mounts: one file server
// (package vfs) per mount of its policy, each on a virtio-serial port of
// its own (machine.Options.Ports, named vfsproto.PortName), and what the
// guest agent must be told to mount them (agentproto.Mount).
//
// Resolve turns a configuration's mounts into Mounts a started sandbox
// serves: the host directory made absolute against the configuration
// directory, the owner's name turned into the uid and gid of that user of
// the sandbox's image (the sandbox's user when the mount names none).
// Open checks every host directory before anything boots, so a missing
// one is an error naming the spec line. It never prints.
package sandboxfs
