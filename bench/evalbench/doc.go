// Command evalbench measures an eval (sbx.Eval, what "sbx eval" runs):
// the wall time of N runs at most P at once (N = 1, 4 and 8, P = 4 by
// default) against N times one run on its own, measured in the same
// session, so that the ratio holds on a shared, noisy machine.
//
// It makes the hermetic busybox sandbox of package internal/machine/machinetest
// (the Debian kernel and busybox-static, a guest agent built from this
// tree, a private build cache) with the spec of the eval VM test
// (internal/e2etest/testdata/eval/sbx.hcl: a read-write workspace mount with hidden and
// tmpfs paths) over a host tree of -files text files of 16 KiB, builds
// its image once, and runs one warm-up eval of one run. Then each of
// -rounds rounds runs an eval of one run alone (P=1), one eval per N at
// P, and one run alone again. Every run's command reads every file of
// the workspace (sha256sum), writes one file and edits another; a run
// that does not exit 0 with exactly those two changes is an error, not a
// sample.
//
// "N × one run" is N times the median of the lone runs: what running the
// N runs one after another costs. The ratio is the eval's wall time over
// it; below 1 the fan-out wins. Per-run figures (boot, command) are
// medians of the index's boot_ms and command_ms.
//
// It prints a Markdown table and the raw samples on standard output and
// its progress on standard error. Every eval has a timeout; on an
// interrupt the eval stops its VMs, and the program exits non-zero if
// a QEMU process of its own is left. Run it from the repository root,
// with qemu-system-x86_64 on PATH and apt-get able to download the two
// packages (or the per-user test package cache holding them):
//
//	go run ./bench/evalbench [-rounds 1] [-p 4] [-n 1,4,8] [-files 200] [-work DIR]
//
// Booting, copying and collecting are package sbx's (internal/fanout);
// this program only drives and times them.
package main
