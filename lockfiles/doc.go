// Package lockfiles reads and writes sbx.lock.hcl, the file that pins every
// input of every image: OCI digests, npm versions and integrity, URL and file
// hashes, Debian package versions, and the input hash over everything that
// affects an image's bytes. After a build it also records output hashes.
//
// The file is machine-owned. Write renders it canonically (sorted, fixed
// formatting, a header comment) and replaces it atomically; Read is strict:
// anything Write would not have produced — unknown attributes, unsorted
// blocks, hand edits that change formatting — is an error, never silently
// repaired. Resolution (turning sources into pins) lives in
// builders/resolve; this package only holds and serializes the result.
package lockfiles
