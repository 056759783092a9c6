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
// Files appear owned by the mount's owner (the host reports its uid and
// gid, and the mount uses access=client), so the sandbox's non-root user
// can use them; the modules 9pnet, 9pnet_fd and 9p must be loaded (they
// are in kernel.DefaultModules).
//
// The guest agent calls Mount for each mount before the first exec; the
// port names and mount options are package vfs/vfsproto's. The entry
// point is Mount.
package vfsmount
