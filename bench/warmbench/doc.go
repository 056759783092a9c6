// Command warmbench measures warm starts — sandboxes resumed from the
// saved machine of their shape (package internal/snapshot,
// sandbox.Options.Snapshots) — side by side with cold boots of the same
// sandbox in one run, so that the ratios hold on a shared, noisy
// machine.
//
// It makes the hermetic sandbox of package internal/machine/machinetest
// (the Debian kernel, busybox and a guest agent built from this tree, in
// a private cache), starts it through internal/sandbox directly, and
// measures:
//
//   - the first start of the shape (Saved: boot, save, resume) and the
//     snapshot's size on disk, the allocated bytes of each file;
//   - time to first exec — from sandbox.Start's call to the answer of
//     an exec of true — cold against warm, n of each, alternated: warm
//     from a cache opened afresh for each start (what a new sbx process
//     pays, the snapshot's verification and the copy of its memory
//     included) and warm from the cache the process has loaded already;
//   - N sandboxes started at once (1, 4 and 8 by default), cold and
//     warm from one loaded cache: the time until every one has answered
//     its first exec, then, once they have been idle for a while, each
//     QEMU's PSS and RSS (/proc/PID/smaps_rollup);
//   - where a warm start's time goes (sandbox.Started and
//     machine.Timings): the snapshot's load, the machine's directory and
//     overlay, QEMU's start to QMP, the state's restore, the agent's
//     hello, the configure request and the exec.
//
// Every start and wait is bounded; every sandbox is stopped at the end,
// whatever failed. The sandboxes have an empty policy (their user-space
// network reaches nothing) and no mounts. It prints the tables of the README's "Warm
// starts" section, and every raw sample.
//
// Run it from the root of the repository:
//
//	go run ./bench/warmbench -n 3
package main
