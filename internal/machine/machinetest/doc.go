// Package machinetest gives tests a hermetic sandbox to boot: a
// configuration directory whose image is made only of local files — the
// real Debian generic kernel package and the real busybox-static
// package, both fetched once with apt-get into the per-user test package
// cache that package internal/build/archive/archivetest also uses — plus a
// guest agent built from this source tree, a private build cache and the
// environment that points sbx at them. The sandbox's user, "agent"
// (uid 1000), has a home directory; busybox provides the shell and the
// commands the tests run (sh, cat, id, uname, head, sha256sum, kill…).
//
// It is test support, imported only by tests (the end-to-end suite
// internal/e2etest, the root package's examples, and the VM tests of
// machine, sandbox, command and others) and by the benchmarks under
// bench/. New returns errors rather than failing a testing.TB so that
// TestMain, which runs examples too, can use it; Require is the form for
// tests, and fails when qemu-system-x86_64 is missing (skips, saying so,
// with SBX_SKIP_VM_TESTS=1).
//
// Booting is package machine's; locking and building are package
// pipeline's, the path the command line and the Go API take.
//
// The entry points are New, Require and Fixture.Build.
package machinetest
