// Package vmbench holds what the benchmarks that boot the test sandbox
// (bench/netbench, bench/vfsbench, bench/sandboxbench, bench/densitybench,
// bench/warmbench)
// share, so that
// they set up, time and report alike: Preflight, WorkDir and NewFixture
// make the sandbox fixture of package internal/machine/machinetest in a work
// directory, and Setup runs the three in turn; Log writes their timestamped progress; Exec times one
// command in a guest; Samples and the formatting functions are the
// statistics and figures of their reports; ParseSmaps and GuestRAM read
// a QEMU's memory from /proc/PID/smaps; Exit turns their errors into an
// exit status.
//
// It reports through errors and writers and never exits. What each
// benchmark measures, and its report's tables, stay with the benchmark.
//
// The entry points are Preflight and Samples.
package vmbench
