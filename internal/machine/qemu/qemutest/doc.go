// Package qemutest decides, in one place, whether a test that boots QEMU
// runs, fails or skips.
//
// A test that needs qemu-system-x86_64 calls Require. When the emulator
// is on PATH the test runs. When it is missing the test fails, naming
// the packages to install: a green `go test ./...` must not hide that the
// VM tests did not run. Setting SBX_SKIP_VM_TESTS=1 opts out explicitly:
// every test that calls Require then skips, saying so. A TestMain, which
// has no *testing.T, calls Check and acts on its answer.
//
// It is imported by tests only, never by production code. It does not
// start QEMU (package internal/machine/qemu) or build the images the tests boot
// (package internal/machine/machinetest).
package qemutest
