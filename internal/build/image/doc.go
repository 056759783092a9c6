// Package image builds an image block into the files a VM boots from: the
// kernel, the initramfs holding the guest agent and the kernel modules it
// loads, and the root disk (ext4 inside qcow2). It ties the builder packages
// together in one direction:
//
//	lock check → fetch inputs → assemble root filesystem → canonical tar
//	          → ext4 → qcow2 → load kernel and its modules → initramfs
//
// Outputs are kept in the content-addressed cache (package internal/build/cache)
// under a build key, the sha256 of the recipe's input hash, the guest agent
// binary's digest, the epoch and the builder's FormatVersion: everything
// that decides the output bytes. Every output is made in a private staging
// directory first and stored only once all of them exist; the manifest
// (image.json) is stored last, and a build whose manifest is in the cache is
// whole. A second Build with the same key is therefore a cache hit that
// checks the stored digests and touches no network. A failed build, a full
// disk included, leaves neither staging files nor partial outputs behind.
// The kernel and initramfs are also kept under a key of their own (kernel
// package, modules, agent, epoch), so that a change to artifacts, users or
// files rebuilds only the disk instead of reading the kernel package again.
//
// The outputs are byte-reproducible. No clock is read: every timestamp is
// Options.Epoch, which the command line takes from SOURCE_DATE_EPOCH
// (0 when unset). The ext4 UUID and hash seed derive from the input hash.
// Options.Verify rebuilds from scratch, ignoring cached outputs, and
// compares every digest with the cached build and with the hashes the lock
// records; a difference is a *VerifyError naming each output.
//
// ExportGondolin writes the same image as a Gondolin guest-asset directory
// (vmlinuz-virt, initramfs.cpio.lz4, a raw writable rootfs.ext4 labelled
// gondolin-root and manifest.json), replacing the directory atomically.
//
// Every long step stops soon after ctx ends (Ctrl-C): fetching, reading
// the kernel package, writing the initramfs, hashing and storing outputs
// read and write through package internal/ctxio, and the disk stages are
// checked between. The error then wraps ctx's.
//
// Package image does not pin sources (internal/build/resolve), read or write the
// lock file (lockfiles; the command records Result's digests there), fetch
// by itself (internal/build/fetch), decide what the root filesystem holds
// (internal/build/rootfs) or how ext4, qcow2 and cpio are laid out (internal/build/ext4,
// internal/qcow2, internal/build/initramfs). It never prints: progress goes to
// the callbacks in Options.
//
// The entry points are Build and ExportGondolin.
package image
