// Package qcow2 writes qcow2 (version 3) disk images in pure Go, so that a
// build needs no QEMU tools.
//
// Entry points: [Convert] turns a raw disk image into a sparse qcow2 image;
// [ConvertFile] does the same from one file path to another, writing
// atomically and skipping the holes of a sparse source; [Create] makes an
// empty image (a scratch disk) and [CreateOverlay] a copy-on-write image
// over a backing file (a per-sandbox root disk over a shared base).
//
// Output is a pure function of the input: the same raw bytes and options
// give the same image bytes. The format holds no timestamps, and the layout
// is fixed: cluster 0 holds the header, its extensions and the backing file
// name; the data clusters follow in guest order, then the L2 tables, the L1
// table, the refcount table and the refcount blocks. Every host cluster is
// referenced exactly once, so `qemu-img check` finds no leaks. Clusters that
// read as all zeros are left unallocated. The virtual size is rounded up to
// a multiple of 512 bytes, as QEMU does for raw images.
//
// It does not compress, encrypt, store internal snapshots or bitmaps, and
// it does not read or modify existing qcow2 images (beyond reading a backing
// image's virtual size). The file system inside the raw image is made by
// other builder packages; starting VMs on these disks is the qemu
// provider's job.
package qcow2
