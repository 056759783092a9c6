// Package digest hashes files and streams with sha256, the one hash every
// pin and cache name in sbx uses, and holds the error that says content
// is not what it was pinned to be.
//
// File refuses anything but a regular file, so that a FIFO or device a
// spec points at cannot stall a lock or a build, and stops at its next
// chunk once its context ends. MismatchError is what the resolvers
// (package internal/build/resolve), downloads (package internal/build/download) and
// the fetcher (package internal/build/fetch) return when bytes do not hash to
// their pin; it names the input and both hashes.
//
// Package digest does not store anything (package internal/build/cache keeps
// blobs by their digest, and has its own mismatch error for that) and
// does not download.
//
// The entry points are File and Reader.
package digest
