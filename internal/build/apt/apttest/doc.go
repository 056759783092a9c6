// Package apttest keeps real Debian packages for tests in a per-user
// cache, os.UserCacheDir()/sbx-test/debs: Download fetches a package with
// the host's apt (package internal/build/apt) the first time and serves the
// cached copy after that, and DebianKernel follows the kernel meta
// package to the versioned generic amd64 kernel the same way. Cache is a
// Downloader over it, for code that takes one.
//
// It is test support, but reports through errors rather than
// testing.TB, so that fixtures made outside a test (the VM fixture of
// package internal/machine/machinetest, the benchmarks) share it with the test
// helpers (archivetest.AptDownload, kerneltest.DebianKernelDeb), which
// turn ErrNoApt into a skip. Production code never imports it.
//
// The entry points are Download and DebianKernel.
package apttest
