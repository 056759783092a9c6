// Package fanout runs one command across many fresh sandboxes of one
// spec, each on its own copy of the workspace, and keeps what each run
// did in a results directory. It is the engine behind sbx eval and
// sbx.Eval; booting a sandbox is the caller's (Options.Start), so that
// both reach the VM through the same lock → build → start path
// (package pipeline) and this package never imports it.
//
// Run first snapshots every read-write workspace mount's host directory
// (CopyTree: FICLONE reflinks where the file system has them, else a
// plain copy; hidden and tmpfs paths of the mount are never copied, nor
// the results directory) into a private 0700 work directory, then, for
// each run, copies that snapshot again, starts a sandbox whose mounts
// are served from the run's copy, runs the command with SBX_RUN set to
// the run's index, stops the sandbox, and compares the run's copy with
// the snapshot (Compare). The changes go into the run's directory as a
// tarball and a unified diff, and one JSON line per finished run is
// appended to the index and synced (Index), so an interrupted eval keeps
// every run that finished. Runs that an interrupt cut short leave
// nothing: no line, no directory.
//
// The guest never reaches the host's tree: the original is only read,
// once, to make the snapshot, and every path the mount hides is left out
// of it, so a hidden file is absent from the guest's copy even if the
// mount's rules were to fail. Reading a run's copy back never follows a
// link the guest made.
//
// It never prints; progress goes to Options.OnRun.
package fanout
