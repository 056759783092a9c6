// Package sandboxfs serves a sandbox's workspace mounts: one file server
// (package vfs) per mount of its policy, each on a virtio-serial port of
// its own (machine.Options.Ports, named vfsproto.PortName), and what the
// guest agent must be told to mount them (agentproto.Mount).
//
// A Mount is a mount as a started sandbox serves it: its host directory
// absolute, its owner as numbers (pipeline.Mounts makes them from a
// configuration; the package does not read one). Open checks every host directory before anything boots, so a missing
// one is an error naming the spec line. It never prints.
package sandboxfs
