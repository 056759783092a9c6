// Package guest is the sbx guest agent: the program the kernel starts as
// PID 1 from the initramfs. Init runs the boot (package guest/initsys)
// in order, under a watchdog, and then does what the configured mode
// (bootproto.Mode, from the kernel command line) says. The one mode so
// far, ready-poweroff, prints the ready line and powers the machine off;
// serving commands to the host is to be another mode.
//
// Init never hangs and never lets PID 1 die: every wait has a timeout,
// the whole boot has a deadline (sbx.boottimeout), and an error or a
// panic prints one "sbx-guest: error: ..." line on the console and powers
// the machine off, where a dying PID 1 would panic the kernel.
//
// The agent is a library so that it can be tested on the host: Init
// takes the file-system root, the system calls and the console as
// parameters (Options). cmd/sbx-guest only calls Init with the real ones.
// Building the agent binary for an image is package builders/agentbin's;
// putting it into an initramfs is package builders/initramfs's; the boot
// contract both sides share is package guest/bootproto.
//
// The entry point is Init.
package guest
