// Package archive reads the archives that image inputs and kernels come
// in: plain tar, compressed tar (gzip — npm tarballs with their entries
// under "package/" — xz, zstd and bzip2), Debian packages (.deb: an ar
// archive holding debian-binary, control.tar.* and data.tar.*) and Alpine
// packages (.apk: concatenated gzip streams for the signature, the control
// data and the file tree). The format is told by magic bytes, never by
// file names.
//
// Walk visits the entries of an archive's file tree in archive order — for
// a .deb those of data.tar, for an .apk those of the data segment, never
// .PKGINFO or .SIGN.* — with names cleaned ("./usr/bin/x" becomes
// "usr/bin/x"; the root entry "./" is not visited). Extract finds one file
// by name or by a glob that must match exactly one entry, and says which
// names came close when none does; ExtractFileTo does the same for an
// archive on disk but streams the file to a function instead of returning
// its bytes, so that a file of hundreds of megabytes is never held in
// memory (it reads the archive twice: once to find the file and resolve
// links, once to stream it; it reads at most 4,194,304 entries). Control reads a package's own fields
// (the deb control file, the apk .PKGINFO). CheckEntry says whether an
// entry is safe to write under a directory: Walk passes every entry as it
// is and callers that extract a whole tree decide what to do with unsafe
// ones. Decompress opens a single compressed stream, such as a kernel
// module stored as .ko.xz.
//
// The package only reads. Fetching and verifying archives is package
// internal/build/resolve's; turning a tree into a root filesystem, and choosing
// a kernel and its modules (package internal/build/kernel), are the callers'.
// Package archivetest writes archives of every format for tests.
//
// The entry points are Walk and Extract (and WalkFile, ExtractFile and
// ExtractFileTo for archives on disk).
package archive
