// Package kerneltest gives tests kernels to work with: DebianKernelDeb
// returns the real Debian generic amd64 kernel package (downloaded once
// with apt-get into os.UserCacheDir()/sbx-test/debs and reused), for tests
// that boot a guest or build an initramfs; ModuleObject writes the ELF
// object with a .modinfo section that package kernel reads a module's
// name and dependencies from, for synthetic kernel packages.
//
// It is test support: it reports through testing.TB and is imported only
// from tests. Reading kernels is package kernel's; fetching packages for
// real builds is package internal/build/resolve's.
//
// The entry points are DebianKernelDeb and ModuleObject.
package kerneltest
