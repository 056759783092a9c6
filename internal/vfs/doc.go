// Package vfs is the host's file server for a sandbox's mounts: it
// serves one host directory per mount over 9P2000.L to the guest's
// kernel, with the mount's path rules (policy.Mount) enforced on every
// operation.
//
// The guest is hostile root and may speak the protocol directly, so the
// server trusts nothing it names:
//
//   - Paths are checked against the rules (Rules) as the guest names them,
//     relative to the mount's root: hidden paths do not exist (ENOENT on
//     lookup, absent from listings, EACCES on create, rename or link onto
//     them); read-only paths, and everything in an "ro" mount, refuse
//     every change with EROFS; tmpfs paths live in the server's memory,
//     start empty and never reach the host.
//   - A path is resolved on the host with openat2(RESOLVE_NO_SYMLINKS |
//     RESOLVE_BENEATH) from the root's descriptor, so no symbolic link is
//     ever followed on the host (host_linux.go says why os.Root is not
//     enough). Links are served as links; the guest's kernel resolves
//     them through the server, path by path, like any other name.
//   - Renaming a directory is refused when a path under it would change
//     class (a hidden file coming into view, a file moving into a hidden
//     or read-only path), and a hard link to a read-only file is refused.
//   - In a read-write mount the git directories the host holds when the
//     server starts are protected, whatever the rules say (gitmeta.go):
//     only what commits and checkouts write is writable, sequencer state
//     lives in memory, ".git" entries and git directories stay in
//     place, no symbolic link is made in them, and in the user's work
//     tree the guest makes no ".git" and no "HEAD". Git on the host
//     runs nothing and reads no repository the guest chose.
//     policy.Mount.GitWritable turns this off.
//   - What a guest can make the server hold is bounded (Limits): message
//     size, requests in flight, files, open host files, listing and
//     tmpfs memory. The framing layer (conn.go) enforces the per-message
//     bounds before the 9P library sees a message.
//
// Every file appears owned by the mount's owner (Options.UID, GID);
// files created on the host belong to the user running the server.
// Ownership changes are accepted and ignored. The guest's modes never
// weaken the host (modes.go): a chmod, create or mkdir gives a host
// entry at most the permission bits the server's umask allows, never
// group or other write, never a set-user-ID, set-group-ID or sticky
// bit, and leaves the mount's root as it is; the guest sees the mode
// it set, which the server remembers (bounded) while the host's mode
// is the one it left.
//
// The same file system is served over FUSE (Server.FUSE): a FUSE
// session answers one request at a time from any number of goroutines
// (a virtiofs backend's virtqueue workers), every operation through
// the file operations 9P uses, so that the rules, bounds and errnos
// are the same (fuse.go; the wire format is package
// internal/proto/fuseproto's). FUSE.ServeDev serves a /dev/fuse mount,
// which tests use to run programs over the host kernel's own client.
//
// The transport is the caller's: Serve takes any connection, in sbx the
// host end of a virtio-serial port named vfsproto.PortName(i), which the
// guest agent (package guest/vfsmount) relays to its kernel's 9p client.
// Deciding which mounts a sandbox has, and the owner's numbers, is the
// supervisor's; the rules' language is package policy/match's, which lang
// validates with, so a spec that validates compiles here.
//
// The server needs Linux 5.6 or later (openat2). The entry points are
// New and Server.Serve (9P) or Server.FUSE; CompileRules compiles a mount's rules
// (policy/match's patterns plus the mount's access; git protection is
// added by New).
package vfs
