package machine

import (
	"context"
	"errors"
	"os"
	"sync"

	"github.com/sbx-dev/sbx/internal/machine/qemu"
	"github.com/sbx-dev/sbx/internal/machine/vm"
)

// Hypervisor runs a machine's VM: what Start needs of QEMU, or of
// another hypervisor, and nothing more. Its types are package vm's, so
// that a hypervisor implements it without importing this package.
// Capabilities only some hypervisors have are separate interfaces a
// Hypervisor may also implement, found by type assertion: Snapshotter,
// the warm start's.
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

// Snapshotter is a Hypervisor that saves a running VM's state and
// starts a VM from a saved one: what Machine.Save and Options.Resume
// need. The guest's RAM is not in the state: it is the file the saved VM
// ran on (vm.Spec.Memory, shared), which the restored VM maps private.
type Snapshotter interface {
	// Save writes the state of p's VM to w and leaves the VM stopped,
	// its disk flushed; the caller ends it.
	Save(ctx context.Context, p vm.Process, w *os.File) error
	// Restore loads the state in r into p's VM, started with
	// vm.Spec.Incoming, and returns once its guest runs.
	Restore(ctx context.Context, p vm.Process, r *os.File) error
	// StateID names what a saved state of a guest of architecture arch
	// depends on here (the hypervisor's build, its accelerator): a
	// state saved under one ID is only restored under the same.
	StateID(ctx context.Context, arch string) (string, error)
}

// FileSharer is a Hypervisor that gives a running VM file system
// devices whose backend is the caller's: what Machine.AddFS needs. The
// backend speaks vhost-user on the other end of the socket, reading and
// writing the guest's buffers in its RAM, which must be shared memory
// (vm.Spec.FSSlots asks for both the slots and that).
type FileSharer interface {
	// AddFS plugs a file system device named tag into slot of p's VM,
	// its vhost-user backend at the other end of the connected unix
	// socket sock, which must be serving already.
	AddFS(ctx context.Context, p vm.Process, slot int, tag string, sock *os.File) error
	// CanShareFiles says why a VM of architecture arch (an OCI name)
	// cannot be given file system devices on this host, or is nil when
	// it can.
	CanShareFiles(ctx context.Context, arch string) error
}

// CanShareFiles says why a machine of architecture arch (an OCI name)
// started on hv (nil means DefaultHypervisor) cannot be given file
// system devices (Options.FSSlots, Machine.AddFS) on this host, or is
// nil when it can.
func CanShareFiles(ctx context.Context, hv Hypervisor, arch string) error {
	if hv == nil {
		hv = DefaultHypervisor()
	}
	fs, ok := hv.(FileSharer)
	if !ok {
		return errors.New("the hypervisor cannot give a machine file system devices")
	}
	return fs.CanShareFiles(ctx, arch)
}

// MaxFSSlots is the most file system slots a machine has
// (Options.FSSlots).
const MaxFSSlots = qemu.MaxFSSlots

var (
	_ Hypervisor  = (*qemu.Hypervisor)(nil)
	_ Snapshotter = (*qemu.Hypervisor)(nil)
	_ FileSharer  = (*qemu.Hypervisor)(nil)
)

// defaultHypervisor is the Hypervisor of a machine given none: QEMU, on
// what qemu.Probe finds, probed by each Start, as machines given no host always were.
func defaultHypervisor() Hypervisor { return qemu.New(nil) }

// DefaultHypervisor is QEMU, on what qemu.Probe finds, as one value
// for every caller in this process: the host is probed once, by the
// first that needs it.
func DefaultHypervisor() Hypervisor { return sharedHypervisor() }

var sharedHypervisor = sync.OnceValue(defaultHypervisor)
