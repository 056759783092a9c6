// Package cache is the content-addressed store image builds read their
// inputs from and keep their outputs in.
//
// Blobs live under ROOT/blobs/sha256/<hex>, named by the sha256 of their
// bytes. Put is the only way in: it streams the content into a temporary
// file inside ROOT, hashes it on the way, checks it against the digest the
// caller was promised, syncs it and renames it into place. A failed
// writer, a short write or a digest mismatch leaves nothing behind, so a
// blob that is present is whole. Puts of the same digest may run at the
// same time, in one process or several: each writes its own temporary
// file and the renames are atomic. Build outputs, which are known by the
// input hash of the recipe that made them rather than by their own bytes,
// live under ROOT/outputs/<input-hash-hex>/<name> and are written the
// same way by PutOutput.
//
// The root defaults to $SBX_CACHE_DIR, else the sbx directory under the
// user's cache directory (DefaultRoot).
//
// Package cache does not download anything (package internal/build/fetch brings
// pinned inputs into it) and does not decide what a digest should be: pins
// come from the lock file (package lockfiles).
//
// The entry point is Open.
package cache
