// Package guest is the sbx guest agent: the program the kernel starts as
// PID 1 from the initramfs. Init runs the boot (package guest/initsys)
// in order, under a watchdog, and then does what the configured mode
// (bootproto.Mode, from the kernel command line) says. Both modes print
// the ready line. ready-poweroff then powers the machine off (it proves
// an image boots). serve runs the exec server (package guest/execsrv) on
// the virtio-serial port named bootproto.AgentPort, one host connection
// after another, with the image's /etc/passwd as its user database and
// PID 1's reaper (execsrv.InitReaper, which replaces initsys's) for its
// processes, and one guestcfg.State for all connections, which applies
// the host's configure requests (network, CA, exec defaults); it stops when the host writes the power-off request on the
// port named bootproto.ControlPort, then terminates every process (SIGTERM,
// then SIGKILL after two seconds; the workspace mounts' relay processes,
// which ignore SIGTERM, last, after a sync), and the machine powers off as after
// any mode: sync, root remounted read-only, power off. A control port of
// its own, rather than a message of the agent protocol, keeps the
// power-off reachable whatever state that protocol is in, and needs no
// ACPI event handling in the guest.
//
// Init never hangs and never lets PID 1 die: every wait has a timeout,
// the whole boot has a deadline (sbx.boottimeout), and an error or a
// panic prints one "sbx-guest: error: ..." line on the console and powers
// the machine off, where a dying PID 1 would panic the kernel.
//
// The agent is a library so that it can be tested on the host: Init
// takes the file-system root, the system calls and the console as
// parameters (Options). cmd/sbx-guest only calls Init with the real ones.
// Building the agent binary for an image is package internal/build/agentbin's;
// putting it into an initramfs is package internal/build/initramfs's; the boot
// contract both sides share is package internal/proto/bootproto.
//
// The entry point is Init.
package guest
