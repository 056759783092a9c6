// Package kernel reads a guest kernel out of a kernel package: the kernel
// image, its version, the modules it ships and which of them a guest must
// load, in what order.
//
// # Where a kernel comes from
//
// The kernel a spec names is a Debian kernel package holding the image
// under boot/ and its modules under lib/modules/VERSION/ (or
// usr/lib/modules/VERSION/); an Alpine linux-virt .apk or any tar laid out
// the same way works too. The generic amd64 kernel is used, not the
// "cloud" flavour: only the generic one has 9p and its fd transport
// (9pnet_fd), which the guest's file sharing needs.
//
// A spec names the meta package linux-image-amd64, which holds no files
// and only depends on the current versioned package, or the versioned
// package itself:
//
//	kernel {
//	  source = "deb:linux-image-amd64"
//	  file   = "boot/vmlinuz-*"
//	}
//
// The lock pins one .deb by its sha256, so it has to be the package that
// holds the kernel: `sbx lock` (package internal/build/resolve) follows a deb:
// kernel source's meta package with FollowMeta to the versioned package
// and pins that, never the meta package, so the build fetches exactly
// the package the lock saw. A meta package reaching Load some other way
// (a file: or https source) fails with a *MetaPackageError that spells
// out the source to write instead (`apt-cache depends linux-image-amd64`
// shows the same answer).
//
// # Modules
//
// Debian ships no modules.dep (depmod writes it at install time), so Load
// reads each module's own .modinfo section: its name, depends=, softdep=
// and aliases. A modules.dep in the archive, where there is one, overrides
// depends=. modules.builtin says which modules are compiled in and need no
// file. Closure lists the modules to load for a set of names, every
// dependency before its dependents, soft "pre:" dependencies before and
// "post:" ones after; names may be aliases ("crypto-crc32c"), resolved to
// a built-in module when one has the alias and otherwise to the provider
// whose name sorts first (crc32c_generic before crc32c_intel: the generic
// one works on every CPU). DefaultModules are what every sbx guest loads.
//
// Load reads the archive once. It keeps the decompressed bytes of every
// module in the closure of DefaultModules and Options.Modules, including
// dependencies the archive lists before the modules needing them: those
// wait in a temporary spill file until the whole archive has been read
// (docs/decisions/0005-kernel-package-reading.md). ReadModules asked for
// that closure therefore reads nothing; asked for other modules, it reads
// the archive again.
//
// Modules may be stored compressed (.ko.xz, .ko.zst, .ko.gz). Module
// reports the compression, and ReadModules always returns the
// decompressed bytes, to be placed at Module.File: the guest agent then
// loads every module with a plain init_module and does not depend on the
// kernel having been built with in-kernel module decompression.
//
// The package reads; it does not fetch kernel packages (package
// internal/build/resolve), write the initramfs or the root filesystem (the
// image builders), or load modules (the guest agent). Package kerneltest
// gives tests the real Debian kernel package.
//
// Load and ReadModules take a context: once it ends they stop before the
// next archive entry or chunk of one (package internal/ctxio), so that an
// interrupted build does not read the rest of a kernel package.
//
// The entry point is Load; then Kernel.Closure and Kernel.ReadModules.
package kernel
