// Package vfsmount is the guest's half of a sandbox's workspace mounts:
// it mounts the 9P file system the host serves (package vfs) on one
// virtio-serial port at a guest path, through the kernel's 9p client.
//
// Linux's 9p fd transport cannot use a virtio-serial port's descriptor
// directly (measured: the mount hangs), so Mount gives the kernel one end
// of a socket pair and relays bytes between the other end and the port
// for as long as the mount lives. The relay only copies: every decision
// about what the guest may see or change is the host's, which is why a
// guest root that replaces the relay gains nothing.
//
// The relay is a process of its own: the agent's binary started again
// with RelayArg, which calls RunRelay. It must not be the agent's
// goroutines, because the agent cannot run while it starts a command
// the kernel reads from a mount (a script or program stored there, or a
// working directory inside it): Go forks with vfork, and the forking
// thread keeps the runtime's processor until the child has exec'd, so
// with one vCPU (GOMAXPROCS=1) no goroutine runs until the child's
// chdir and execve have had their 9P answers — which only the relay
// could carry. A relay process depends on nothing the agent does.
//
// Files appear owned by the mount's owner (the host reports its uid and
// gid, and the mount uses access=client), so the sandbox's non-root user
// can use them; the modules 9pnet, 9pnet_fd and 9p must be loaded (they
// are in kernel.DefaultModules).
//
// MountFS mounts a file system the host serves by a virtio-fs device
// instead (decision 0011): the kernel's virtiofs driver speaks FUSE to
// the device, the host's backend answers, and no guest process relays
// anything; the modules fuse and virtiofs must be loaded.
//
// The guest agent calls Mount or MountFS for each mount before the first
// exec; the port names and mount options are package
// internal/proto/vfsproto's. The entry points are Mount and MountFS, and
// RunRelay for the relay process.
package vfsmount
