// Package cpio writes cpio archives in the "newc" format (magic "070701"),
// the format the Linux kernel unpacks as an initramfs.
//
// Entry points: [Writer] writes entries in the order given, and
// [WriteFiles] writes a whole set of [File]s in a canonical order with
// missing parent directories added and hard links grouped.
//
// Archives are reproducible by construction: every entry carries the one
// modification time given to [NewWriter] (for instance SOURCE_DATE_EPOCH),
// inode numbers are assigned in sequence from 1, owners are what the caller
// says, and the device of the containing file system is always 0:0. The
// same entries in the same order give the same bytes.
//
// Regular files, directories, symbolic links, character and block devices,
// FIFOs, sockets and hard links are supported. A hard-linked file's data is
// stored with its first name; later names carry no data and share its inode
// number, which both the kernel and GNU cpio accept.
//
// It does not read archives, compress them (package gondolin frames an
// archive in legacy LZ4 for Gondolin), or walk host directories: callers
// hand it entries, usually from the flattened image tree.
//
// Why not u-root's pkg/cpio: it also writes newc with device nodes, and
// its cpio.MakeReproducible normalises records after the fact, but it
// brings the u-root module along for what is a short, fixed format; this
// writer is small, has no dependencies and is reproducible without a
// separate pass.
package cpio
