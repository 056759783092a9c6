// Command densitybench measures how much host memory an idle sandbox
// costs beyond its guest's RAM, for the machine sandboxes run and the one
// sbx ran before decision 0009 (docs/decisions/0009-density.md), side by
// side in one run, and how many idle sandboxes this host holds at once.
//
// It makes the hermetic sandbox of package internal/machine/machinetest (the
// Debian kernel, busybox and a guest agent built from this tree, in a
// private cache) and, for each of -n rounds, boots the old machine
// (machine.Bench.Legacy) and then the new one, one at a time, each with
// -memory of guest RAM and one vCPU, and:
//
//   - lets it idle, then reads QEMU's /proc/PID/smaps. The overhead is
//     the anonymous resident memory ("Anonymous") of every mapping but
//     the guest RAM's: QEMU's heap and stacks, the kernel it keeps to
//     boot from, its written data pages and TCG's translation buffer,
//     which no other sandbox shares and the host cannot reclaim. Clean
//     file pages (QEMU's code and libraries, the mapped initramfs) are
//     held once by the page cache for every QEMU, and reported apart,
//     with the resident set beyond the guest RAM (RSS, which counts
//     them) and PSS;
//   - times a workload and QEMU's CPU time for it: gofmt over the
//     largest files of the toolchain's go/types (a Go program whose code
//     does not fit a small translation buffer) and sha256sum of 16 MiB
//     (a small, hot loop), with the boot itself;
//   - writes 512 MiB to a tmpfs in the guest, frees it, and reads how
//     much of the guest RAM mapping is still resident some seconds
//     later: with free page reporting the guest gives it back.
//
// Then, unless -max is 0, it starts supervised sandboxes of the new
// machine (supervisor.Spawn running "sbx supervise", as sbx up does),
// -parallel at a time, until -max run, or one more boot would bring the
// host's MemAvailable below -reserve, or -count-time has passed; lets
// them idle; and reports how many it held, the MemAvailable each took
// and the CPU the idle ones use.
//
// It prints Markdown tables and the raw samples on standard output and
// its progress on standard error. Every wait has a timeout; on an error
// or an interrupt it stops everything it started, and it exits non-zero
// when a QEMU it started is left running. Run it from the repository
// root, with qemu-system-x86_64 on PATH:
//
//	go run ./bench/densitybench [-n 1] [-max 64] [-reserve 4] [-count-time 10m]
//
// Booting is package machine's and supervising package supervisor's;
// this program only drives and measures them.
package main
