// Package machine starts and stops one sandbox's virtual machine on this
// host and reaches the guest agent inside it.
//
// Start takes plain boot files (BootFiles: a kernel, an initramfs, a
// qcow2 root disk, their platform and kernel parameters; package sandbox
// makes them from a built image) and the machine's size, and:
//
//   - makes a private directory for the machine: a qcow2 copy-on-write
//     overlay over the image's disk (the image itself is never written),
//     the unix sockets QEMU listens on (QMP, the agent port, the control
//     port), the two it connects to (NetSocket, ConsoleSocket) and the
//     serial console's log (ConsoleFile);
//   - listens on NetSocket, then starts the VM through its Hypervisor
//     (Options.Hypervisor; nil means QEMU, package internal/machine/qemu),
//     described hypervisor-neutrally (package internal/machine/vm), with
//     the agent in serve mode (bootproto.ModeServe) and exactly one
//     network device, a virtio-net device whose other
//     end is that socket ("-netdev stream"); it takes QEMU's connection,
//     and no other, within the boot deadline and hands it to
//     Options.Network. The default, Sink, reads and drops every frame
//     the guest sends and answers none, counting them (NetStats): the
//     guest has a device and no network, never an open one;
//   - waits, at most Options.BootTimeout, for the agent to answer the
//     host's hello on the agent port (package guestconn). A guest that
//     fails, powers off or never answers is an error that quotes the
//     agent's error line and the tail of the console, never a hang.
//
// The guest's serial console is the host's to keep, and the guest may
// write to it endlessly: QEMU does not write it to a file but sends it to
// ConsoleSocket, where the machine reads it as fast as it comes and
// writes it to a log of at most Options.ConsoleMax bytes (8 MiB by
// default) in each of two files, ConsoleFile and ConsoleFile+".1", the
// older (package consolelog). The host never holds up the guest's
// console: when the log cannot keep up, what does not fit a 1 MiB queue
// is dropped and the log says how much. The ready line, the error lines
// and the console's tail quoted in errors are read from the log's end,
// never the whole of it.
//
// The returned Machine runs commands and moves files through its
// guestconn.Client (Exec, Start, Put, Get). Stop powers the guest off:
// it writes a power-off request on the control port (bootproto
// ControlPowerOff), after which the agent ends every process, flushes and
// detaches the root disk and powers off; a guest that has not gone within
// Options.StopTimeout is killed with its whole QEMU process group. Either
// way Stop returns only once QEMU has exited; it ends the Network's
// Serve, moves the console's log to Options.KeepConsole when set, and
// removes the machine's directory, sockets and overlay included.
//
// Hypervisor is all the machine uses of its hypervisor: Probe (what the
// host offers a guest of one architecture) and Start (the VM's process,
// a vm.Process it waits for and kills). Capabilities only some
// hypervisors have, such as a warm start from a snapshot, are to be
// separate interfaces found by type assertion; there are none yet.
//
// Package machine does not build images or know how they are built (it
// imports nothing of internal/build; the qcow2 overlay is written with
// internal/qcow2), render QEMU's command line or speak QMP
// (internal/machine/qemu), speak the agent protocol
// itself (guestconn), or read the network device's framing itself
// (machine/netstream). It serves no network and shares no files: the
// host's network stack (package egress) is to be given to it as
// Options.Network, and file sharing (vfs) wired in here.
//
// Options.Bench (Bench) holds settings for benchmarks only, each giving
// up something a sandbox needs; sandboxes leave it zero. They reach the
// hypervisor as vm.Spec.Bench.
//
// The entry point is Start.
package machine
