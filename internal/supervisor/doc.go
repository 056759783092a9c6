// Package supervisor keeps one sandbox running beyond the command that
// started it, and lets many commands use it at once.
//
// The frame routing that lets many clients share the guest agent's one
// connection is package router; this package is the process around it:
// its life, its directory, its sockets and who may use them.
//
// Run is the supervisor process itself: it starts the Spec it is given
// (a sandbox.Spec, kept in <dir>/spec.json) through sandbox.Start,
// serves a router.Router on <dir>/supervisor.sock, records itself in
// <dir>/status.json, and stops the sandbox when asked on
// <dir>/control.sock (Stop; the socket's line protocol is package
// proto/control's, its client Stop, Reload and Inspect), when its context ends (SIGTERM, in the
// command that calls it) or when the guest goes. Spawn starts Run in a
// detached process, re-executing the current binary, and waits until the
// sandbox is ready; Dial connects a guestconn.Client to a running
// supervisor. SandboxDir names a sandbox's supervisor directory under the
// per-user RuntimeBase, short enough for unix socket paths whatever the
// configuration's path, so that "sbx exec NAME" finds it. List finds
// every supervisor directory under the base ("sbx ps -a"); ListConfig
// those of one configuration, by the directory SandboxDir gives them,
// whatever a state file records ("sbx destroy" of what a failed apply or
// a lost state left).
//
// Inspect and Remove take process ids (from state or the status file) as
// hints only: a process counts as the sandbox's supervisor or QEMU, and
// Remove signals it, only when it runs as this user with exactly the
// command line sbx gave it ("<binary> supervise DIR"; QEMU's monitor
// socket in a machine directory of DIR), checked and signalled through a
// pidfd so that a reused id is never hit; QEMU's process group is
// signalled only when that QEMU leads it. Where there are no pidfds
// Remove signals nothing (and fails when such a process still runs).
// Remove deletes only the files, sockets and machine directories sbx
// makes in DIR, never through a symbolic link, and leaves DIR when it
// holds anything else. Which directory is the sandbox's is the caller's
// to say, from SandboxDir, never from a path read from a file.
//
// Other local users are kept out (the runtime base may be in a shared
// /tmp). Every directory sbx keeps sockets and files in — the runtime
// base, the configuration's hash directory, the sandbox's directory and
// the machine's inside it — must be a real directory (no symbolic link)
// owned by this user with mode 0700 (sbx makes them so, and closes one of
// its own that is open); those above must be owned by the user or root
// and, if others may write them, sticky. Anything else is refused with an
// *UnsafeError naming the path. Files there (log, status, spec) are opened
// with O_NOFOLLOW and must be this user's regular files; writes replace
// them through a new temporary file, never through a planted link. The
// sockets are 0600, the supervisor accepts only clients of its own user,
// and Dial, Stop and Inspect refuse a server of another user (*PeerError)
// before they send it anything (SO_PEERCRED, LOCAL_PEERCRED; other
// systems refuse every peer).
//
// It does not read configurations (the layer above turns one into a
// Spec: pipeline.SandboxSpec, or pipeline.PlannedSpec of a plan), build images (internal/build/image),
// start the sandbox's machine, network or file servers itself
// (sandbox), speak the guest's side of the protocol (guest/execsrv) or
// record sandboxes in the configuration's state (state). It never
// prints; Run logs to the slog.Logger it is given.
//
// The entry points are Spawn, Dial and Stop for a sandbox's supervisor
// process, and Run for the process itself.
package supervisor
