package vm

import (
	"context"
	"os"

	"github.com/sbx-dev/sbx/platform"
)

// Accel is a hardware accelerator a VM runs under, by QEMU's name for it
// ("-accel").
type Accel string

// The accelerators sbx knows. TCG (QEMU's own translator) works
// everywhere; the others only for guests of the host's architecture.
const (
	AccelKVM Accel = "kvm" // Linux
	AccelHVF Accel = "hvf" // macOS
	AccelTCG Accel = "tcg"
)

// Host is what a hypervisor on this host offers a guest of one
// architecture.
type Host struct {
	// Accel is the accelerator such a guest runs under.
	Accel Accel
	// Note says why an accelerator the host appears to have is not the
	// one used ("KVM present but unusable: ...; using TCG"), or is
	// empty.
	Note string
}

// Spec is one virtual machine as a hypervisor should run it. Paths are
// used as given; the sockets the VM connects to (ConsoleSocket,
// NetSocket) must be listening before it starts, those it listens on
// (ControlSocket, AgentSocket, Ports) are made by the hypervisor.
type Spec struct {
	// Name names the VM in its process title and messages.
	Name string
	// Platform is the guest's platform.
	Platform platform.Platform
	// CPUs is the number of virtual CPUs, at least 1.
	CPUs int
	// MemoryBytes is the guest's memory, a whole number of MiB.
	MemoryBytes int64

	// Kernel and Initrd are the files booted directly, without a boot
	// loader; Cmdline the kernel parameters the hypervisor appends to
	// its own (the console's, panic's).
	Kernel  string
	Initrd  string
	Cmdline []string
	// RootDisk is the guest's first virtio-blk disk, a qcow2 image (the
	// machine's copy-on-write overlay), written by the guest.
	RootDisk string

	// ConsoleSocket is the unix socket the serial console is sent to;
	// whoever listens must read it, or the guest waits.
	ConsoleSocket string
	// ControlSocket is where the hypervisor listens for its own control
	// protocol (QEMU's QMP, Cloud Hypervisor's or Firecracker's API).
	ControlSocket string
	// AgentSocket is the unix socket the hypervisor listens on for the
	// guest agent's virtio-serial port.
	AgentSocket string
	// Ports are further virtio-serial ports: the name the guest sees →
	// the unix socket the hypervisor listens on for it.
	Ports map[string]string
	// NetSocket is the unix socket the guest's one virtio-net device is
	// connected to, carrying frames as package netstream frames them;
	// empty means no network device, unless Bench.UserNetwork.
	NetSocket string
	// Log is where the hypervisor's own output goes; empty keeps only
	// its last few KiB, for error messages.
	Log string

	// Memory, when set, backs the guest's RAM with a file instead of
	// anonymous memory: the RAM of a VM whose state is to be saved
	// (Shared), or the saved RAM a warm start maps (not Shared). nil is
	// anonymous memory.
	Memory *Memory
	// RootBacking, when set, is the RootDisk overlay's backing file,
	// open: the hypervisor's process has it as descriptor BackingFD, so
	// that an overlay naming BackingPath as its backing file is over
	// this very file, whatever its path names by the time the
	// hypervisor opens it (a warm start's verified disk).
	RootBacking *os.File
	// Incoming starts the VM waiting for its saved state rather than
	// booting: its CPUs run once a Snapshotter's Restore has loaded the
	// state. Kernel, Initrd, Cmdline and every device must be those of
	// the VM the state was saved from.
	Incoming bool
	// FSSlots is how many file system devices the VM can be given while
	// it runs (a FileSharer's AddFS), one per slot; it is part of the
	// VM's shape, as its devices are. Memory must be Shared then.
	FSSlots int
	// MAC is the network device's address; empty lets the hypervisor
	// derive one from Name. A warm start sets the saved VM's.
	MAC string

	// Bench are settings for comparisons only (machine.Bench, which
	// says what each gives up); sandboxes leave them zero. A hypervisor
	// that has no such setting refuses a Spec that asks for it.
	Bench Bench
}

// BackingFD is the descriptor Spec.RootBacking has in the hypervisor's
// process, and BackingPath the name an overlay gives it as its backing
// file.
const (
	BackingFD   = 4
	BackingPath = "/proc/self/fd/4"
)

// Memory is a file that holds a guest's RAM.
type Memory struct {
	// Path names the file; File, when set, is it already open (the
	// hypervisor then uses the descriptor and not Path, which only
	// names it in messages).
	Path string
	File *os.File
	// Shared maps the file shared: the guest's writes reach it. A
	// private mapping (Shared false) gives the guest a copy-on-write
	// view: its writes stay in its own memory and the file is never
	// changed through it.
	Shared bool
}

// Bench are a Spec's settings for benchmarks only, as machine.Bench
// (which documents them) hands them to the hypervisor.
type Bench struct {
	UserNetwork  bool
	VirtFS       string
	Legacy       bool
	TCGBufferMiB int
}

// Process is a running VM.
type Process interface {
	// Pid is the VM's process id, which is also its process group's.
	Pid() int
	// Done is closed once the VM's process has exited.
	Done() <-chan struct{}
	// Wait waits until the process exits or ctx ends: nil for a clean
	// exit (the guest powered off), else an error with the
	// hypervisor's last message.
	Wait(ctx context.Context) error
	// Kill ends the process at once, and returns once it is gone.
	Kill() error
}
