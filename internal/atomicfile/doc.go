// Package atomicfile replaces files so that readers see either the old
// content or the whole new content, never a part: the new content is written
// to a temporary file in the same directory, synced, given its mode and
// renamed over the target, and the directory is synced. On any failure the
// temporary file is removed and the target is untouched.
//
// The temporary file is always created exclusively, so a symbolic link
// planted at its name is never followed, and the rename replaces a link at
// the target's name instead of writing through it. WriteIn works relative
// to an open directory (an *os.Root) so that the directory is resolved
// once: package state writes .sbx/state.json with it after checking that
// .sbx is not a link.
//
// Every file sbx owns (lock file, state, saved plans, formatted specs, disk
// images, manifests) is written through Write, WriteBytes or WriteIn.
// Content-addressed blobs have their own verified path in internal/build/cache.
package atomicfile
