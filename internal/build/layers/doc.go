// Package layers flattens the layers of an OCI image into one file tree
// and writes that tree as a canonical tar stream.
//
// Flatten reads layers in order (plain tar, tar+gzip or tar+zstd, told by
// the content's magic bytes; the media type only has to name a layer),
// applies whiteouts (".wh.NAME" deletes NAME from the layers below,
// ".wh..wh..opq" empties a directory of what the layers below put in it),
// and lets later layers override earlier ones, as overlayfs would show
// them. Names are taken literally: nothing is ever written to or looked up
// on the host file system, symbolic links are kept as they are and never
// followed, an entry below a path that is not a directory is an error,
// and absolute names, ".." and hard links to paths outside the tree or
// absent from it are rejected with the layer and entry named. The order of
// entries inside a layer does not matter.
//
// A hard link shares its file with its target, as on disk: when a later
// layer replaces or deletes the target, the link keeps the content it was
// made with (overlayfs does the same), so a whiteout of a target neither
// drops the link nor is an error.
//
// Regular file contents go to a temporary spill file, not to memory, so a
// tree may hold hundreds of megabytes; Close removes it. Add and Remove let
// the root filesystem assembler place its own files on top. SetLimits
// bounds the bytes a tree spills and the entries it takes in, so that an
// archive bomb stops with a *LimitError instead of filling the disk.
//
// WriteTar emits the tree in a canonical form: PAX format, entries sorted
// by path component by component (so a directory comes before its
// children), every modification time set to one epoch, user and group
// names empty, uid, gid, mode, extended attributes and device numbers
// kept, and every path but the first of a set of hard-linked paths written
// as a hard link to that first one. The same layers give the same bytes.
//
// Package layers does not fetch or verify layers (package internal/build/fetch
// does, into package internal/build/cache) and does not build file systems from
// the tar stream (package internal/build/ext4 does).
//
// The entry points are Flatten and NewTree.
package layers
