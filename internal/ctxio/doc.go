// Package ctxio gives readers and writers that stop once a context ends,
// so that a long copy, hash, decompression or archive walk ends at its next
// chunk after Ctrl-C instead of running to the end: each Read or Write
// first checks the context and returns its error when it is done.
//
// The builders wrap the files they stream with it (kernel packages read
// by internal/build/kernel, the initramfs written by internal/build/initramfs, outputs
// hashed and stored by internal/build/image and internal/build/cache) rather than
// checking the context by hand between steps. A wrapper checks before each
// call; what one call does (one buffer's worth) is never cut short.
//
// The entry points are Reader and Writer, and ReaderAt and WriterAt for
// the random-access reads and writes of disk images (internal/build/ext4,
// internal/qcow2).
package ctxio
