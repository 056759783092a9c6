// Package qemu runs sandboxes as local QEMU virtual machines: it finds
// what the host offers, turns a machine's description into QEMU's
// argument vector, and starts and stops the emulator.
//
// The pieces are kept apart so that each can be tested on its own:
//
//   - Probe (host probing) finds the qemu-system-ARCH emulators, their
//     versions and features, and the accelerators that really work. KVM
//     counts only when /dev/kvm opens read-write, the CPU reports vmx or
//     svm and a tiny test guest (testdata/kvmprobe.S) runs to its end
//     under it within a few seconds; some hosts have a /dev/kvm that
//     hangs guests. Otherwise the Host's Note says why TCG is used. The
//     verdict is cached per boot of the host.
//   - Command (pure) turns a VMSpec and a Host into the argument vector:
//     q35 (x86) or virt (arm) with no default devices, the kernel booted
//     directly, the root disk on virtio-blk, virtio-serial ports on unix
//     sockets, virtio-rng, a virtio-balloon that only reports the pages
//     the guest frees (so QEMU returns them to the host), a bounded TCG
//     translation buffer, and either no network device at all or one
//     virtio-net device whose other end is the host's userspace network
//     stack over "-netdev stream" (never QEMU's user-mode network).
//     Golden tests in testdata/*.txtar pin it.
//   - Launch starts QEMU from that vector in its own process group and
//     connects to its monitor; Process.Kill ends the group. QEMU gets a
//     minimal environment (Environment: PATH, HOME, TMPDIR, LC_ALL=C),
//     never the user's tokens and credentials.
//   - Hypervisor is package machine's Hypervisor for QEMU: Probe (once,
//     unless New is given a Host) and Start, which turns the
//     hypervisor-neutral vm.Spec into a VMSpec (SpecFor, pure) and
//     Launches it.
//
// The QMP client is package qmp (internal/machine/qemu/qmp). This package does
// not build kernels, initramfs or disks (internal/build/...), does not speak to
// the guest agent over its port, and does not serve the guest's network
// or files (egress, vfs); it only wires their sockets into the machine.
package qemu
