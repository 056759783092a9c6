// Package mirror finds local copies of pinned url inputs in a directory
// the user names with $SBX_MIRROR_DIR, so that an input whose host cannot
// be reached (a CI machine without access to a release host) is locked
// and built from a file already at hand, without editing the spec.
//
// The input's sha256 is its identity: a file in the directory is used
// only when its content hashes to the sha256 the spec declares (when
// locking) or the lock pins (when building), so the directory can hold
// anything and a wrong file is never used. Find looks at two names in the
// directory only, the sha256 in hex and the last element of the URL's
// path (moltnet_linux_amd64.tar.gz), and does not recurse; the spec's
// source string, the lock and every plan stay the same as with a
// download.
//
// Package mirror neither downloads nor caches: package internal/build/resolve
// asks it before downloading to pin a declared sha256, and package
// internal/build/fetch before downloading into the cache (package
// internal/build/cache). Hint writes the advice both add to a failed
// download.
//
// The entry points are Find and Hint.
package mirror
