package machine

import (
	"context"

	"github.com/sbx-dev/sbx/internal/machine/qemu"
	"github.com/sbx-dev/sbx/internal/machine/vm"
)

// Hypervisor runs a machine's VM: what Start needs of QEMU, or of
// another hypervisor, and nothing more. Its types are package vm's, so
// that a hypervisor implements it without importing this package.
// Capabilities only some hypervisors have are separate interfaces a
// Hypervisor or its vm.Process may also implement, found by type
// assertion (a warm start from a snapshot is to be one); Start uses
// none yet.
type Hypervisor interface {
	// Probe says what the host offers a guest of architecture arch
	// (an OCI name): its accelerator, and a note when a better one is
	// not usable. It fails when the hypervisor cannot run here at all
	// (no emulator installed). Start calls it before anything else.
	Probe(ctx context.Context, arch string) (vm.Host, error)
	// Start starts the VM's process for spec and returns once the
	// hypervisor listens on spec's sockets (ControlSocket, AgentSocket,
	// Ports); it has connected, or is connecting, to those the machine
	// listens on (ConsoleSocket, NetSocket). ctx bounds the start only:
	// the process runs until it exits or is killed. On failure nothing
	// is left running.
	Start(ctx context.Context, spec vm.Spec) (vm.Process, error)
}

var _ Hypervisor = (*qemu.Hypervisor)(nil)

// defaultHypervisor is the Hypervisor of a machine given none: QEMU, on
// what qemu.Probe finds, probed by each Start, as machines given no host always were.
func defaultHypervisor() Hypervisor { return qemu.New(nil) }
