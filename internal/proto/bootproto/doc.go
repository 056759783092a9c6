// Package bootproto is the boot contract between the host side of sbx and
// the guest agent: what the initramfs holds and where, the module
// manifest, the kernel command-line parameters that configure the agent,
// the lines the agent prints on the serial console, and the names of the
// virtio-serial ports a serving agent uses (AgentPort for the agent
// protocol, ControlPort for control lines such as ControlPowerOff).
//
// Both sides import it: internal/build/initramfs lays out the initramfs and
// writes the module manifest with it, internal/machine/qemu renders the
// kernel command line with Config.Params and reads the console with ParseReady,
// and the agent (packages guest and guest/initsys) parses the same
// command line and prints the same lines. Keeping them here means the two
// sides cannot drift apart.
//
// It holds data and their encodings only; it performs no I/O beyond the
// readers and writers it is given. Booting is package guest/initsys's,
// and choosing what the agent does after boot is package guest's.
//
// The entry points are ParseCmdline (guest side), Config.Params (host
// side), WriteModuleList/ParseModuleList, Ready/ParseReady and
// ControlLine/ParseControl.
package bootproto
