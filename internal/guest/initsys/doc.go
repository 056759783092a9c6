// Package initsys brings a guest from the kernel's hand-over to a mounted
// root file system: the work of PID 1 in the initramfs. It mounts the
// kernel file systems, loads the kernel modules the initramfs lists,
// waits for the root disk, checks and mounts it, moves the kernel mounts
// into it and switches root, sets the host name, reaps orphaned
// processes, and shuts the machine down cleanly.
//
// Every step is a method of Boot, which takes the file-system root it
// works under (Boot.Root, "/" in the guest) and the system calls it makes
// (Boot.Sys, the Sys interface) as parameters, so the steps run in tests
// on the host against a temporary directory and a recording Sys. Linux
// returns the real system calls.
//
// It does not decide the order of the steps, what happens after boot or
// how failures are reported (package guest does), and it does not build
// the initramfs it runs from (package internal/build/initramfs). The boot
// contract shared with the host, such as paths and the module manifest,
// is package internal/proto/bootproto.
//
// The entry point is Boot; Linux gives its Sys, StartReaper reaps
// children.
package initsys
