// Package state holds what sbx last applied: one record per materialized
// resource (image.NAME, sandbox.NAME) with the attributes it was applied
// with, in .sbx/state.json under a configuration directory.
//
// The file has a format version, a lineage (a random UUID fixed when the
// state is first saved, so a state cannot be mixed up with another
// configuration's) and a serial that grows with every write. Load reads it
// (a missing file is an empty state). Lock takes an exclusive lock on
// .sbx/state.lock, waiting while another sbx process holds it and naming
// that process when it gives up; the returned Lease saves the state
// atomically (temporary file, fsync, rename), first copying the state on
// disk to .sbx/state.json.backup the same way, and refuses to overwrite a
// state of another lineage or a newer serial. A state file that is not
// valid is a *CorruptError, whose message says how to recover (the
// backup, or stopping the sandboxes without the state). Marshal renders
// the file's canonical bytes. The format is described in
// docs/lockfile.md.
//
// A configuration directory may be an untrusted checkout, so .sbx and its
// files may have been written by someone else. This package follows no
// symbolic link below the configuration directory: .sbx must be a
// directory and state.json, its backup and state.lock regular files, or
// Load and Lock fail with an error naming the path and read or write
// nothing through them. The lock file is never truncated: the holder's process id is
// written only into a lock file of this user with a single name that is
// empty or holds nothing but a process id, so a file that is not sbx's (a
// hard link to a user's file, say) is locked but never changed.
//
// Package plan reads state and compares it with the desired resources;
// package apply (later) writes it. This package decides nothing about
// changes and never holds secret values: a sandbox's policy names where a
// secret comes from, not what it is.
package state
