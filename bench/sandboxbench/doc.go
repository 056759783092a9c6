// Command sandboxbench measures what sbx adds to running a sandbox, side
// by side with the baseline in one run, so that the ratios hold on a
// shared, noisy machine.
//
// It makes the hermetic sandbox of package internal/machine/machinetest (the
// Debian kernel, busybox and a guest agent built from this tree, in a
// private cache), builds sbx from this tree, and measures:
//
//   - boot to first exec: bare QEMU booting the same kernel, initramfs
//     and root disk on the same machine type, with an argument vector of
//     its own, against "sbx run DIR box -- true", alternated n times
//     after one warm-up of each. Bare QEMU is timed from the process's
//     start to its first console line (the kernel's banner: it boots
//     with loglevel=6 where sbx boots quiet, after which the first line
//     would be the agent's), to the agent's ready line and to its exit.
//     The agent reaches its ready line without sbx's kernel parameters:
//     their defaults are the root disk /dev/vda and the mode
//     ready-poweroff, which prints the line and powers off. sbx run is
//     timed from start to exit;
//   - the round trip of an exec of true in a running sandbox: through a
//     supervisor (supervisor.Spawn running "sbx supervise", then one
//     supervisor.Dial and 50 Execs) and through 10 "sbx exec" commands,
//     sbx's own process start included. A failed exec is counted and
//     reported, not timed;
//   - the host memory of an idle sandbox beyond its guest's RAM, with one
//     and then four supervised sandboxes: the supervisor's and QEMU's
//     resident and proportional set sizes (smaps_rollup), less the guest
//     RAM mapping found in QEMU's smaps (see guestRAM), and how much of
//     the rest is TCG's translation buffer.
//
// It prints Markdown tables and the raw samples on standard output and
// its progress on standard error. Every wait has a timeout; on an error
// or an interrupt it stops what it started, and it exits non-zero when a
// QEMU it started is left running. Run it from the repository root, with
// qemu-system-x86_64 on PATH and apt-get able to download the two
// packages (or the per-user test package cache holding them):
//
//	go run ./bench/sandboxbench [-n 5] [-work DIR]
//
// A -work directory is kept, and a later run reuses its build cache; by
// default a temporary one is used and removed.
//
// Booting is package machine's, supervising package supervisor's and the
// command line package command's; this program only drives and times
// them.
package main
