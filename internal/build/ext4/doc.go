// Package ext4 writes an ext4 root filesystem image from a tar stream.
//
// The image is byte-reproducible: the UUID and directory hash seed derive
// from a caller-given seed, every timestamp comes from the tar entries
// clamped to a caller-given epoch, and nothing reads the clock or a random
// source. The filesystem is writable, has no journal unless asked for one,
// and keeps the free space up to the requested size correctly accounted so
// that the guest kernel can mount it read-write and grow files in it.
// e2fsck -fn accepts every image it writes.
//
// Supported entries: regular files, directories, symbolic links (stored in
// the inode below 60 bytes, in a block above), hard links, character and
// block devices, FIFOs, setuid/setgid/sticky bits, 32-bit uid and gid,
// nanosecond timestamps, and extended attributes (user., trusted.,
// security. and POSIX ACLs) taken from PAX "SCHILY.xattr." records.
//
// Package ext4 does not fetch, flatten or order layers and does not apply
// whiteouts: the rootfs assembler produces the canonical tar stream it
// reads. It does not wrap the image in qcow2 or any other container
// format either.
//
// The entry point is Build.
package ext4
