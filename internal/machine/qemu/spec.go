package qemu

import "github.com/sbx-dev/sbx/internal/machine/vm"

// SpecFor is the VMSpec that runs spec: the same machine, field by
// field, its control socket QEMU's QMP socket and its log QEMU's. It
// only copies; Command checks the result.
func SpecFor(spec vm.Spec) VMSpec {
	return VMSpec{
		Name:          spec.Name,
		Platform:      spec.Platform,
		CPUs:          spec.CPUs,
		MemoryBytes:   spec.MemoryBytes,
		Kernel:        spec.Kernel,
		Initrd:        spec.Initrd,
		Cmdline:       spec.Cmdline,
		RootDisk:      spec.RootDisk,
		ConsoleSocket: spec.ConsoleSocket,
		QMPSocket:     spec.ControlSocket,
		AgentSocket:   spec.AgentSocket,
		Ports:         spec.Ports,
		NetSocket:     spec.NetSocket,
		UserNetwork:   spec.Bench.UserNetwork,
		VirtFS:        spec.Bench.VirtFS,
		TCGBufferMiB:  spec.Bench.TCGBufferMiB,
		Legacy:        spec.Bench.Legacy,
		QEMULog:       spec.Log,
		MAC:           spec.MAC,
		Incoming:      spec.Incoming,
		Memory:        memoryFor(spec.Memory),
		RootBacking:   spec.RootBacking,
		FSSlots:       spec.FSSlots,
	}
}

func memoryFor(m *vm.Memory) *Memory {
	if m == nil {
		return nil
	}
	return &Memory{Path: m.Path, File: m.File, Shared: m.Shared}
}
