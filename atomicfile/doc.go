// Package atomicfile replaces files so that readers see either the old
// content or the whole new content, never a part: the new content is written
// to a temporary file in the same directory, synced, given its mode and
// renamed over the target, and the directory is synced. On any failure the
// temporary file is removed and the target is untouched.
//
// Every file sbx owns (lock, state, saved plans, formatted specs, disk
// images, manifests) is written through Write or WriteBytes. Content-addressed
// blobs have their own verified path in builders/cache.
package atomicfile
