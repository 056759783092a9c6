// Package state holds what sbx last applied: one record per materialized
// resource (image.NAME, sandbox.NAME) with the attributes it was applied
// with, in .sbx/state.json under a configuration directory.
//
// The file has a format version, a lineage (a UUID fixed when the state is
// first created, so a state cannot be mixed up with another configuration's)
// and a serial that grows with every write. Writes are atomic (temporary
// file, fsync, rename) and happen under an exclusive lock on
// .sbx/state.lock, so two sbx runs cannot interleave. Package plan reads
// state; package apply (later) writes it.
package state
