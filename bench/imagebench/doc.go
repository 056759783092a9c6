// Command imagebench measures sbx's image build against the baseline
// users run today, mke2fs -d followed by qemu-img convert, on the same
// realistic input, in one run.
//
// The input is a spec it writes: a root filesystem of real Debian
// packages (busybox, libc, coreutils, bash, git, perl, python, gcc,
// vim's runtime and more: about 370 MB in some nine thousand paths), the
// Codex CLI binary from npm (about 300 MB) and Debian's kernel. Packages
// come through the host's apt configuration at their candidate versions
// and Codex through the host's npm configuration, as `sbx lock` fetches
// them.
//
// It times, as child processes so that wall time and peak resident
// memory are measured the same way for every tool:
//
//   - sbx build with an empty cache (downloads included), from scratch
//     with the inputs in the cache (-verify), after a change to one file
//     (the kernel and initramfs come from the cache), and again with
//     nothing changed (a cache hit);
//   - on the canonical tar of the assembled root filesystem: sbx's disk
//     path (internal/build/ext4, then internal/qcow2) against the tree extracted
//     to a directory and passed to mke2fs -t ext4 -d and qemu-img convert
//     -O qcow2.
//
// It prints a Markdown table with the sbx/baseline ratios. Run it from the
// repository root, as root (the baseline's directory must carry the
// tree's owners), with apt-get, npm, tar, mke2fs and qemu-img on PATH:
//
//	go run ./bench/imagebench -work /var/tmp/imagebench
//
// The tree and disk subcommands are the measured sbx steps, which run
// re-executes; they are not meant to be called by hand.
package main
