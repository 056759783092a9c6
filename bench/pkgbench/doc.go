// Command pkgbench measures sbx's package-set image build against the
// standard Debian tools on the same pinned closure, in one run.
//
// The input is a spec it writes: an image with `packages = [...]`
// (git and ca-certificates by default) from the host's apt sources, in an
// empty root, so the closure includes the Essential and required
// packages, as debootstrap's minbase variant would. Round 0, not timed,
// locks and builds it once into a warm cache, which downloads every .deb,
// the repository indexes and the kernel. Then, for N rounds, alternating
// which side goes first:
//
//   - sbx: pipeline.Lock resolves the package closure (the lock keeps only
//     the kernel's pin) and pipeline.Build builds the image, both in this
//     process, into a fresh cache seeded by hard links with round 0's
//     inputs (the .debs, the verified indexes, the kernel package) and its
//     kernel and initramfs outputs, which the standard side does not make.
//     The root filesystem, its ext4 disk and the qcow2 are made from
//     scratch. The lock still fetches each suite's InRelease from the
//     configured mirror, as sbx lock always does.
//   - standard: `apt-get install --simulate` of the same request with an
//     empty dpkg status and `?essential ?priority(required)` added (no
//     recommends, apt's binary caches disabled so that it parses its
//     lists, which apt-get update fetched beforehand); then `apt-get
//     download` of the locked NAME=VERSION list into a directory that
//     already holds the same .debs (copied from sbx's cache under apt's
//     file names, so apt checks their hashes and fetches nothing), `dpkg-deb
//     -x` of each, `mke2fs -t ext4 -d` into a raw image of the image's
//     size and `qemu-img convert -O qcow2`.
//
// It prints a Markdown table with the median, best and worst seconds of
// each side for resolve, build and their total, in wall time and in CPU
// time (user and system, of the process and its children: on a shared
// machine it moves less than wall time), the sbx/standard ratios,
// the standard side's steps, what each side produced and whether apt's
// resolution is the same NAME=VERSION set as sbx's lock. The log (stderr)
// has each round's figures and the time of each sbx build stage. It fails
// when either side fails, when a round's lock differs from round 0's,
// when apt-get replaced a prepared .deb (it would have fetched it again),
// or when either disk lacks the checked file (/usr/bin/git by default,
// read with debugfs).
//
// Run it from the repository root, as root (dpkg-deb -x and mke2fs -d
// must keep the packages' owners), with apt-get, dpkg-deb, mke2fs,
// debugfs and qemu-img on PATH:
//
//	go run ./bench/pkgbench -work /var/tmp/pkgbench -rounds 3
package main
