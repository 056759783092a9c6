// Package lockfiles reads and writes sbx.lock.hcl, the file that pins every
// input of every image: OCI digests, npm versions and integrity, URL and file
// hashes, Debian package versions, and the input hash over everything that
// affects an image's bytes. After a build it also records output hashes.
//
// The file is machine-owned. Marshal renders a Lock canonically (header
// comment, images sorted by name, inputs by key, attributes in a fixed
// order, empty values omitted, aligned as hclwrite.Format aligns them) and
// Write replaces the file atomically (temporary file, fsync, rename). Parse
// and Read are strict: anything Marshal would not have produced — unknown
// blocks or attributes, expressions, malformed hashes, unsorted blocks, hand
// edits that change formatting — is an error diagnostic naming the file and
// line, never silently repaired; the errors end by saying that `sbx lock`
// rebuilds the file, and a file with git conflict markers is one error at
// the first marker. Read returns (nil, nil) when the file does not exist.
// The format is described in docs/lockfile.md.
//
// Salvage is the repair `sbx lock` asks for explicitly: it reads what it
// can of a file Parse refuses — both sides of each merge conflict, block
// by block — and returns the pins it could read, the inputs the two sides
// pin differently (for the caller to settle against the configuration)
// and what it dropped.
//
// The lock file may come from an untrusted checkout. ReadFile (and Read)
// read it only from inside the directory that holds it: a symbolic link is
// followed only while it stays in that directory, and a link out of it, a
// dangling link or a file that is not a regular file is an error naming
// the path, with nothing read through it. Write replaces a link at the
// file's name rather than writing through it.
//
// Resolution (turning sources into pins) lives in internal/build/resolve and the
// input hash is computed by internal/recipe; this package only holds and
// serializes the result. Entry points: Read, ReadFile, Write, Marshal,
// Parse, Salvage.
package lockfiles
