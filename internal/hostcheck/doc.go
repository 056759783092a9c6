// Package hostcheck finds out whether this machine can do what sbx asks of
// it, and for each thing that is missing or wrong says how to fix it on
// this OS. It is what "sbx doctor" runs.
//
// Run returns one Result per check, in a fixed order: the QEMU system
// emulator of the host's architecture (and of every other architecture a
// configuration's images use) with its version, the devices sbx's
// machines use and "-netdev stream"; hardware acceleration (KVM or HVF,
// and why not); apt, npm, the OCI registry keychain and qemu-img (for
// provision steps), each only when a
// configuration's sources need it; the runtime directory; and the build
// cache directory. A Result's Fix is the exact command for the package
// manager this OS uses (apt, dnf or Homebrew, found by Detect), or a
// sentence where no command fixes it.
//
// The checks call what sbx itself runs, rather than repeating it: the
// emulators and the accelerator verdict come from internal/machine/qemu's Prober
// (with its cache off, so a fixed problem shows at once), the runtime
// directory from supervisor.RuntimeBase and supervisor.SandboxDir, the
// cache root from internal/build/cache, registry credentials from the same
// keychain sbx pulls with. Only loopback and local programs are used: no
// registry or mirror is contacted (apt-cache and "npm config get" read
// local configuration and indexes).
//
// Package hostcheck never prints and never changes the host (beyond the
// accelerator probe's temporary files): a directory with a wrong mode is
// reported, not repaired. It does not load configurations (package lang
// does; Options.Config takes the result) and does not choose exit codes
// or colours (package command does).
//
// The entry point is Run; Worst summarises its results.
package hostcheck
