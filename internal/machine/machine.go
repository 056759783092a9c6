package machine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine/consolelog"
	"github.com/sbx-dev/sbx/internal/machine/vm"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
	"github.com/sbx-dev/sbx/internal/qcow2"
	"github.com/sbx-dev/sbx/platform"
)

// Defaults for Options fields left zero.
const (
	DefaultCPUs        = 1
	DefaultMemory      = 512 << 20
	DefaultBootTimeout = 2 * time.Minute
	DefaultStopTimeout = 20 * time.Second
)

// Names of the files in a machine's directory.
const (
	OverlayFile = "root.qcow2"
	// ConsoleFile is the serial console's log; once it holds
	// Options.ConsoleMax bytes it is renamed to ConsoleFile+".1"
	// (consolelog.Rotated), replacing the one there, and begun anew.
	ConsoleFile = "console.log"
	// ConsoleSocket is where the machine listens for QEMU's serial
	// console connection; it is removed once QEMU has connected.
	ConsoleSocket = "console.sock"
	QEMULogFile   = "qemu.log"
	QMPSocket     = "qmp.sock"
	AgentSocket   = "agent.sock"
	CtlSocket     = "control.sock"
	// NetSocket is where the machine listens for QEMU's network device
	// connection; it is removed once QEMU has connected.
	NetSocket = "net.sock"
)

// consoleTail is how much of the console an error quotes.
const consoleTail = 3 << 10

// Options describe the machine to start.
type Options struct {
	// Name names the machine (the sandbox's name): QEMU's process title,
	// the guest's host name when Hostname is empty, and messages.
	Name string
	// Boot is what to boot: the kernel, initramfs and root disk, the
	// platform and kernel parameters they need.
	Boot BootFiles
	// CPUs and Memory size the machine; zero means DefaultCPUs and
	// DefaultMemory. Memory is rounded up to a whole MiB.
	CPUs   int
	Memory int64
	// Hostname is the guest's host name; empty means Name when it is a
	// valid host name, else the image's /etc/hostname.
	Hostname string
	// Dir is where the machine's private directory is made; empty means
	// the default temporary directory. Unix socket paths are short, so
	// it must be too (about 80 bytes at most).
	Dir string
	// Hypervisor runs the machine's VM; nil means QEMU, on what
	// qemu.Probe finds (qemu.New(nil)).
	Hypervisor Hypervisor
	// BootTimeout bounds the boot, from QEMU's start to the agent's
	// answer; zero means DefaultBootTimeout. The guest is told the same
	// deadline.
	BootTimeout time.Duration
	// StopTimeout bounds a graceful power-off in Stop before QEMU is
	// killed; zero means DefaultStopTimeout.
	StopTimeout time.Duration
	// Mode is the agent's mode; empty means bootproto.ModeServe, the
	// only one a Machine can be used in. Tests set another to check that
	// a guest that never serves is reported.
	Mode bootproto.Mode
	// KeepConsole, when set, is a file the serial console's log is
	// moved to when the machine ends (Stop, or a failed Start), before
	// its directory is removed, its rotated predecessor to KeepConsole
	// with ".1" (consolelog.Move): the end of a crashed or stopped
	// guest's story stays readable.
	KeepConsole string
	// KeepDisk, when set, is where the machine's root disk (its
	// copy-on-write overlay over Boot.Disk, whose backing file it names)
	// is moved when Stop ends it after its guest powered off: the disk
	// as the guest left it, synced. A machine killed or ended otherwise
	// keeps nothing.
	KeepDisk string
	// ConsoleMax is the most bytes each of the console log's two files
	// holds (ConsoleFile and its rotated predecessor), so the host keeps
	// at most twice that of what the guest writes to its console, the
	// latest; zero means consolelog.DefaultMax (8 MiB).
	ConsoleMax int64
	// Network serves the guest's one network device; nil means a Sink
	// of the machine's own, which reads and drops every frame so that
	// the guest has a device and no network.
	Network Network
	// Bench holds knobs for benchmarks only; sandboxes leave it zero.
	Bench Bench
	// MAC is the network device's address; empty derives one from
	// the machine's name. A machine to be saved and those resumed from
	// it share one (Resume.MAC).
	MAC string
	// MemoryFile, when set, is a file to create for the guest's RAM,
	// mapped shared: a machine that Save is to be called on needs one
	// (its RAM is the saved machine's memory). It must not exist.
	MemoryFile string
	// FSSlots is how many file system devices AddFS can give the
	// machine once it runs (0 to qemu.MaxFSSlots; the hypervisor must
	// be a FileSharer). Their backends map the guest's RAM, so it is
	// shared memory then: MemoryFile's, or a memory file of the
	// machine's own (a resumed machine's a copy of the saved memory, so
	// that it shares no pages with other machines resumed from it). The
	// slots are part of the machine's shape: a machine is resumed only
	// with as many as the saved one had.
	FSSlots int
	// Resume, when set, starts the machine from a saved one (Save)
	// instead of booting it: Boot, CPUs, Memory size, Ports' names and
	// Hostname must be those of the saved machine. The hypervisor must
	// be a Snapshotter.
	Resume *Resume
	// Ports are further virtio-serial ports, by the name the guest finds
	// them under (bootproto.PortsDir), each served on the host by its
	// Port from the start of the boot until the machine stops: a
	// workspace mount's file server, for one. Names are "sbx." and
	// lower-case letters, digits, dots and dashes, and not the agent's
	// own ports.
	Ports map[string]Port
}

// Bench are a machine's settings for comparisons: each one gives up
// something a sandbox needs (its policy, its memory returned to the
// host), so that a benchmark can measure what that costs. Only bench/
// and this package's tests set them (docs/architecture.md,
// "machine.Hypervisor"); internal/sandbox passes them through from its
// own Options.Bench.
type Bench struct {
	// UserNetwork gives the network device QEMU's own user-mode network
	// instead of Network, for comparisons only: it gives the guest the
	// host's network with no policy; sandboxes never use it. Setting
	// both it and Options.Network is an error.
	UserNetwork bool
	// VirtFS, when set, is a host directory QEMU exports with its own 9p
	// server ("-virtfs local", tag qemu.VirtFSTag), for comparisons only:
	// it applies no rules and follows the host's links; sandboxes never
	// use it (bench/vfsbench measures workspace mounts against it).
	VirtFS string
	// Legacy runs QEMU as sbx did before decision 0009
	// (docs/decisions/0009-density.md; qemu.VMSpec.Legacy): QEMU's
	// default translation buffer under TCG, q35's default devices and no
	// balloon, so that the memory the guest frees is never returned to
	// the host. It is for comparisons only (bench/densitybench measures
	// the host memory of idle sandboxes against it); sandboxes never use
	// it.
	Legacy bool
	// TCGBufferMiB sizes QEMU's translation buffer when the machine runs
	// under TCG; zero means qemu.TCGBufferMiB, which sandboxes use.
	// Benchmarks set it to measure what the size costs.
	TCGBufferMiB int
}

// BootFiles are what a machine boots, as plain files on the host: the
// machine knows nothing of how they were built (package sandbox makes
// them from a built image).
type BootFiles struct {
	// Name names what is booted (the image's name): the machine's name
	// when Options.Name is empty, and messages.
	Name string
	// Kernel and Initrd are the kernel and initramfs files.
	Kernel string
	Initrd string
	// Disk is the root disk, a qcow2 image: the backing file of the
	// machine's own copy-on-write overlay, never written.
	Disk string
	// Platform is the guest's platform (its architecture picks QEMU's
	// system emulator).
	Platform platform.Platform
	// Cmdline holds the kernel parameters the files need (the image's
	// root= and console=); the machine adds its own after them.
	Cmdline []string
}

// ResumedNote begins the console log of a resumed machine, followed by
// the saved boot's ready line.
const ResumedNote = "sbx: resumed from a machine saved at its agent's ready point (no boot in this log); the saved boot's ready line:\n"

// Resume is a saved machine (Machine.Save) to start from.
type Resume struct {
	// State is the device state Save wrote; Memory the saved RAM, a
	// sealed copy of the file the saved machine ran on (SealMemory),
	// which the machine maps private. One Memory may serve any number
	// of machines at once: each writes only its own copies of the pages
	// it changes. The caller keeps both, and may close them once Start
	// returns.
	State  *os.File
	Memory *os.File
	// Disk is the saved root disk (a qcow2 image whose backing file is
	// Boot.Disk): the machine's overlay is made over it instead.
	Disk string
	// DiskFile, when set, is Disk open: the overlay is made over this
	// file, which the hypervisor is handed (vm.Spec.RootBacking), not
	// over whatever Disk's path names when it opens it, so that a disk
	// verified is the disk resumed over.
	DiskFile *os.File
	// MAC is the saved machine's network address (Options.MAC).
	MAC string
	// Ready is the saved machine's ready line: a resumed guest does not
	// boot, so does not write one.
	Ready bootproto.Ready
}

// Port serves one of a machine's extra virtio-serial ports. Serve is given
// the host's end of the port once QEMU listens on it; what it writes the
// guest reads from the port's device, and the other way round. It must
// return once conn ends or ctx is done: Stop cancels ctx and closes conn.
// Like the network, a port is the guest's way to the host: Serve must
// treat what it reads as hostile.
type Port interface {
	Serve(ctx context.Context, conn net.Conn) error
}

// checkPortName checks an extra port's name.
func checkPortName(name string) error {
	if name == bootproto.AgentPort || name == bootproto.ControlPort {
		return fmt.Errorf("port %q is the agent's own", name)
	}
	rest, ok := strings.CutPrefix(name, "sbx.")
	if !ok || rest == "" || len(name) > 64 {
		return fmt.Errorf("port %q: names are \"sbx.\" and up to 60 more characters", name)
	}
	for _, c := range rest {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return fmt.Errorf("port %q: names hold lower-case letters, digits, dots and dashes", name)
		}
	}
	return nil
}

// Machine is a running sandbox VM.
type Machine struct {
	name    string
	dir     string
	host    vm.Host
	proc    vm.Process
	client  *guestconn.Client
	control net.Conn
	ready   bootproto.Ready
	hv      Hypervisor
	// saveable says the guest's RAM is a shared file (Options.MemoryFile),
	// resumed that the machine was resumed rather than booted.
	saveable bool
	resumed  bool
	network  Network
	net      *netLink
	console  *consoleLink
	keep     string // Options.KeepConsole
	keepDisk string // Options.KeepDisk
	// poweredOff says Stop saw the guest power off by itself.
	poweredOff bool
	keepMax    int64 // Options.ConsoleMax
	booted     time.Duration
	timings    Timings
	stopTO     time.Duration

	stopOnce sync.Once
	stopErr  error

	ports      []net.Conn // the host's ends of Options.Ports
	portsStop  context.CancelFunc
	portsGroup sync.WaitGroup

	ram *os.File // the guest's RAM when the machine made it (Options.FSSlots)
}

// resumeHelloWait is how long a resumed machine's start waits for its
// agent to answer a hello before it connects again and sends another
// (the first may have been lost as the agent closed the saved machine's
// connection). Tests shorten it.
var resumeHelloWait = 5 * time.Second

// errHelloLost is a resumed agent's hello that had no answer within
// resumeHelloWait.
var errHelloLost = errors.New("the guest agent did not answer the hello")

// Start boots a machine from opts.Boot and returns it once the guest
// agent answers on its port. ctx bounds the start only; the machine runs
// until Stop. On any failure nothing is left running or on disk.
func Start(ctx context.Context, opts Options) (_ *Machine, err error) {
	begin := time.Now()
	boot := opts.Boot
	if boot.Kernel == "" || boot.Initrd == "" || boot.Disk == "" {
		return nil, errors.New("machine: no kernel, initramfs or disk to boot")
	}
	name := opts.Name
	if name == "" {
		name = boot.Name
	}
	where := fmt.Sprintf("sandbox %s", name)
	if opts.Bench.UserNetwork && opts.Network != nil {
		return nil, fmt.Errorf("%s: a Network and the user-mode network both asked for", where)
	}
	if len(opts.Ports) > maxPorts {
		return nil, fmt.Errorf("%s: %d extra ports; at most %d fit", where, len(opts.Ports), maxPorts)
	}
	for pname := range opts.Ports {
		if err := checkPortName(pname); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	platform := boot.Platform
	if platform.Architecture == "" {
		return nil, fmt.Errorf("%s: no platform to boot", where)
	}
	cpus := opts.CPUs
	if cpus <= 0 {
		cpus = DefaultCPUs
	}
	memory := opts.Memory
	if memory <= 0 {
		memory = DefaultMemory
	}
	memory = (memory + 1<<20 - 1) &^ (1<<20 - 1)
	bootTO := opts.BootTimeout
	if bootTO <= 0 {
		bootTO = DefaultBootTimeout
	}
	stopTO := opts.StopTimeout
	if stopTO <= 0 {
		stopTO = DefaultStopTimeout
	}
	hv := opts.Hypervisor
	if hv == nil {
		hv = defaultHypervisor()
	}
	snap, _ := hv.(Snapshotter)
	if r := opts.Resume; r != nil {
		switch {
		case snap == nil:
			return nil, fmt.Errorf("%s: the hypervisor cannot resume a saved machine", where)
		case r.State == nil || r.Memory == nil || r.Disk == "":
			return nil, fmt.Errorf("%s: a saved machine with no state, memory or disk", where)
		case opts.MemoryFile != "":
			return nil, fmt.Errorf("%s: a resumed machine maps the saved memory, not a file of its own", where)
		}
		if err := checkSealed(r.Memory); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	if opts.FSSlots < 0 || opts.FSSlots > MaxFSSlots {
		return nil, fmt.Errorf("%s: %d file system slots; at most %d", where, opts.FSSlots, MaxFSSlots)
	}
	if opts.FSSlots != 0 {
		if _, ok := hv.(FileSharer); !ok {
			return nil, fmt.Errorf("%s: the hypervisor cannot give a machine file system devices", where)
		}
	}
	host, err := hv.Probe(ctx, platform.Architecture)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}

	parent := opts.Dir
	if parent == "" {
		parent = os.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "sbx-")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	m := &Machine{name: name, dir: dir, host: host, hv: hv, stopTO: stopTO, network: opts.Network, keep: opts.KeepConsole, keepDisk: opts.KeepDisk, keepMax: opts.ConsoleMax, saveable: opts.MemoryFile != ""}
	defer func() {
		if err != nil {
			m.kill()
		}
	}()
	if m.network == nil && !opts.Bench.UserNetwork {
		m.network = new(Sink)
	}
	// QEMU connects the guest's network device to this socket as it
	// starts, so it must be listening first.
	if !opts.Bench.UserNetwork {
		m.net, err = listenNet(filepath.Join(dir, NetSocket), m.network)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	// So must the console's socket. The host reads the console and
	// writes it to a log of bounded size itself (package consolelog):
	// QEMU writing it to a file would let the guest fill the disk.
	m.console, err = listenConsole(filepath.Join(dir, ConsoleSocket), filepath.Join(dir, ConsoleFile), opts.ConsoleMax)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if r := opts.Resume; r != nil {
		// A resumed guest does not boot, so its console tells nothing
		// of it: the log begins with the saved boot's ready line, said
		// to be the host's. QEMU has not connected yet: nothing else
		// writes the log.
		m.console.log.Write([]byte(ResumedNote + r.Ready.Line()))
	}

	overlay := filepath.Join(dir, OverlayFile)
	disk := boot.Disk
	if opts.Resume != nil {
		disk = opts.Resume.Disk
	}
	backing, err := filepath.Abs(disk)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	var size int64 // the backing file's
	if r := opts.Resume; r != nil && r.DiskFile != nil {
		backing = vm.BackingPath
		if size, err = qcow2.ImageSize(r.DiskFile); err != nil {
			return nil, fmt.Errorf("%s: saved disk %s: %w", where, r.Disk, err)
		}
	}
	if err := qcow2.CreateOverlay(overlay, backing, "qcow2", size); err != nil {
		return nil, fmt.Errorf("%s: root disk overlay: %w", where, err)
	}

	opts.CPUs, opts.Memory, opts.BootTimeout = cpus, memory, bootTO
	spec := vmSpec(name, opts, dir)
	if opts.FSSlots > 0 && opts.MemoryFile == "" {
		var saved *os.File
		if opts.Resume != nil {
			saved = opts.Resume.Memory
		}
		if m.ram, err = sharedMemory(memory, saved); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		spec.Memory = &vm.Memory{Path: m.ram.Name(), File: m.ram, Shared: true}
	}
	bootCtx, cancel := context.WithTimeout(ctx, bootTO)
	defer cancel()
	mark := time.Now()
	m.timings.Prepare = mark.Sub(begin)
	proc, err := hv.Start(bootCtx, spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	m.proc = proc
	m.timings.Launch = time.Since(mark)
	mark = time.Now()
	if opts.Resume != nil {
		// The saved devices load, and the guest runs on from where it
		// was saved: its agent serves the connection made below.
		if err := snap.Restore(bootCtx, proc, opts.Resume.State); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		m.resumed = true
		m.timings.Restore = time.Since(mark)
		mark = time.Now()
	}
	// The user-mode network has no socket to wait for.
	if m.net != nil {
		if err := m.net.wait(bootCtx, m.proc.Done()); err != nil {
			if errors.Is(err, errQEMUExited) {
				if werr := m.proc.Wait(context.Background()); werr != nil {
					err = fmt.Errorf("%w (%v)", err, werr)
				}
			}
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	if err := m.console.wait(bootCtx, m.proc.Done()); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}

	// The sockets exist once QMP answers: QEMU creates every listening
	// socket before it starts the monitor loop. The guest sees the host
	// connected from now on; what the host writes waits in QEMU until
	// the agent opens its port.
	var d net.Dialer
	m.control, err = d.DialContext(bootCtx, "unix", spec.Ports[bootproto.ControlPort])
	if err != nil {
		return nil, fmt.Errorf("%s: control port: %w", where, err)
	}
	if err := m.servePorts(bootCtx, spec.Ports, opts.Ports); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	agentConn, err := d.DialContext(bootCtx, "unix", spec.AgentSocket)
	if err != nil {
		return nil, fmt.Errorf("%s: agent port: %w", where, err)
	}
	// The hello is answered once the agent serves; give up when QEMU
	// exits (the guest powered off or crashed) or the deadline passes.
	dialCtx, stopDial := context.WithCancel(bootCtx)
	go func() {
		select {
		case <-m.proc.Done():
			stopDial()
		case <-dialCtx.Done():
		}
	}()
	hello := func(conn net.Conn) (*guestconn.Client, error) {
		if opts.Resume == nil {
			return guestconn.DialContext(dialCtx, conn)
		}
		// A resumed guest's agent may lose a hello: one that reaches
		// the saved machine's connection as the agent closes it is
		// dropped with the port's unread data. Such a hello is not
		// waited for until the boot's deadline, but sent again.
		actx, cancel := context.WithTimeout(dialCtx, resumeHelloWait)
		defer cancel()
		c, err := guestconn.DialContext(actx, conn)
		if err != nil && actx.Err() != nil && dialCtx.Err() == nil {
			err = errHelloLost
		}
		return c, err
	}
	m.client, err = hello(agentConn)
	// A resumed guest's agent may still hold the saved machine's
	// connection, which it ends when a new hello arrives on it,
	// refusing that one: it serves the next.
	for tries := 0; err != nil && opts.Resume != nil && (errors.Is(err, guestconn.ErrRefused) || errors.Is(err, errHelloLost)) && tries < 20 && dialCtx.Err() == nil; tries++ {
		agentConn.Close()
		time.Sleep(20 * time.Millisecond)
		if agentConn, err = d.DialContext(dialCtx, "unix", spec.AgentSocket); err == nil {
			m.client, err = hello(agentConn)
		}
	}
	stopDial()
	if err != nil {
		return nil, m.bootError(ctx, bootTO, err)
	}
	m.booted = time.Since(begin)
	m.timings.Agent = time.Since(mark)
	if opts.Resume != nil {
		m.ready = opts.Resume.Ready
		return m, nil
	}
	// The agent wrote its ready line before it answered; it may still
	// be on its way to the log.
	for deadline := time.Now().Add(readyWait); ; {
		if r, ok, _ := bootproto.ParseReady(m.readConsole(1 << 20)); ok {
			m.ready = r
			break
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return m, nil
}

// vmSpec describes the machine opts asks for, named name, with its
// files and sockets in its directory dir: what the hypervisor runs. It
// only computes. opts.CPUs, opts.Memory and opts.BootTimeout are set.
func vmSpec(name string, opts Options, dir string) vm.Spec {
	cfg := bootproto.DefaultConfig()
	cfg.Mode = opts.Mode
	if cfg.Mode == "" {
		cfg.Mode = bootproto.ModeServe
	}
	cfg.BootTimeout = opts.BootTimeout
	cfg.Hostname = opts.Hostname
	if cfg.Hostname == "" && bootproto.CheckHostname(name) == nil {
		cfg.Hostname = name
	}
	params := append(slices.Clone(opts.Boot.Cmdline), "quiet")
	params = append(params, cfg.Params()...)

	spec := vm.Spec{
		MAC:           opts.MAC,
		Incoming:      opts.Resume != nil,
		FSSlots:       opts.FSSlots,
		Name:          "sbx-" + name,
		Platform:      opts.Boot.Platform,
		CPUs:          opts.CPUs,
		MemoryBytes:   opts.Memory,
		Kernel:        opts.Boot.Kernel,
		Initrd:        opts.Boot.Initrd,
		Cmdline:       params,
		RootDisk:      filepath.Join(dir, OverlayFile),
		ConsoleSocket: filepath.Join(dir, ConsoleSocket),
		ControlSocket: filepath.Join(dir, QMPSocket),
		AgentSocket:   filepath.Join(dir, AgentSocket),
		Ports:         portSockets(dir, opts.Ports),
		Log:           filepath.Join(dir, QEMULogFile),
		Bench: vm.Bench{
			UserNetwork:  opts.Bench.UserNetwork,
			VirtFS:       opts.Bench.VirtFS,
			Legacy:       opts.Bench.Legacy,
			TCGBufferMiB: opts.Bench.TCGBufferMiB,
		},
	}
	if !opts.Bench.UserNetwork {
		spec.NetSocket = filepath.Join(dir, NetSocket)
	}
	switch {
	case opts.MemoryFile != "":
		spec.Memory = &vm.Memory{Path: opts.MemoryFile, Shared: true}
	case opts.Resume != nil:
		spec.Memory = &vm.Memory{Path: opts.Resume.Memory.Name(), File: opts.Resume.Memory}
		spec.MAC = opts.Resume.MAC
		spec.RootBacking = opts.Resume.DiskFile
	}
	return spec
}

// bootError explains why the agent did not answer.
func (m *Machine) bootError(ctx context.Context, timeout time.Duration, err error) error {
	var why string
	// A connection that broke rather than timed out is usually QEMU
	// exiting; give it a moment to be seen.
	if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
		select {
		case <-m.proc.Done():
		case <-time.After(2 * time.Second):
		}
	}
	select {
	case <-m.proc.Done():
		why = "the guest stopped before its agent answered"
		if werr := m.proc.Wait(context.Background()); werr != nil {
			why += " (" + werr.Error() + ")"
		}
	default:
		switch {
		case ctx.Err() != nil:
			why = "start cancelled: " + ctx.Err().Error()
		default:
			why = fmt.Sprintf("the guest agent did not answer within %v (%v)", timeout, err)
		}
	}
	console := m.readConsole(consoleTail)
	if msg, ok := bootproto.ParseError(console); ok {
		why += "; the agent reported: " + msg
	}
	return fmt.Errorf("sandbox %s did not become ready: %s\nconsole (%s), last lines:\n%s",
		m.name, why, ConsoleFile, indent(lastLines(console, 20)))
}

// readConsole returns the last limit bytes of the console log (of its
// two files), once it holds what QEMU has sent so far.
func (m *Machine) readConsole(limit int64) []byte {
	if m.console == nil {
		return nil
	}
	var exited <-chan struct{}
	if m.proc != nil {
		exited = m.proc.Done()
	}
	m.console.settle(exited)
	b, _ := consolelog.Tail(filepath.Join(m.dir, ConsoleFile), limit)
	return b
}

func lastLines(b []byte, n int) string {
	s := strings.TrimRight(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n")
	if s == "" {
		return "(empty)"
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// Name returns the machine's name.
func (m *Machine) Name() string { return m.name }

// Dir returns the machine's private directory, removed by Stop.
func (m *Machine) Dir() string { return m.dir }

// Pid returns QEMU's process id, which is also its process group's.
func (m *Machine) Pid() int { return m.proc.Pid() }

// Accel returns the accelerator the machine runs under.
func (m *Machine) Accel() vm.Accel { return m.host.Accel }

// Emulated reports whether the machine runs without hardware
// virtualization (TCG): its guest's commands run many times slower.
func (m *Machine) Emulated() bool { return m.host.Accel == vm.AccelTCG }

// Host returns what the host offered the machine when it started,
// including the note that says why an accelerator was not used.
func (m *Machine) Host() vm.Host { return m.host }

// Ready returns the agent's ready line, and BootTime the time from Start
// to the agent's answer.
func (m *Machine) Ready() bootproto.Ready { return m.ready }

// BootTime returns how long Start took, from its call to the agent's
// answer.
func (m *Machine) BootTime() time.Duration { return m.booted }

// Timings says where Start spent its time.
func (m *Machine) Timings() Timings { return m.timings }

// Timings are the parts of a machine's Start, one after the other.
type Timings struct {
	// Prepare is probing the host and making the machine's directory,
	// its listening sockets and its disk overlay.
	Prepare time.Duration
	// Launch is the hypervisor's start until its monitor answers.
	Launch time.Duration
	// Restore is loading a saved machine's state until its guest runs;
	// zero for a machine that booted.
	Restore time.Duration
	// Agent is from then until the guest agent answers its hello: for
	// a machine that booted, the guest's whole boot.
	Agent time.Duration
}

// Resumed reports whether the machine was started from a saved one
// (Options.Resume) rather than booted.
func (m *Machine) Resumed() bool { return m.resumed }

// Save saves the machine, started with Options.MemoryFile, and ends it: its
// device state is written to state, its guest's RAM stays in the memory
// file, and its root disk (an overlay over the image's disk) is moved to
// disk. The three are a saved machine Options.Resume starts others
// from; this one does not run again, and its directory is removed.
// ctx bounds the save.
func (m *Machine) Save(ctx context.Context, state *os.File, disk string) error {
	snap, ok := m.hv.(Snapshotter)
	if !ok || !m.saveable {
		return fmt.Errorf("sandbox %s: the machine cannot be saved (no Options.MemoryFile, or a hypervisor that does not save)", m.name)
	}
	// The agent's connection ends first: the agent closes its port and
	// opens it again for the next host, which the hypervisor waits for
	// before it saves, so that a resumed guest's agent reads its new
	// host's hello on a fresh open of the port.
	if m.client != nil {
		m.client.Close()
		m.client = nil
	}
	err := snap.Save(ctx, m.proc, state)
	if err == nil {
		// QEMU has flushed the disk and runs the guest no more.
		m.proc.Kill()
		err = moveFile(filepath.Join(m.dir, OverlayFile), disk)
	}
	m.stopOnce.Do(func() {
		m.kill()
		m.stopErr = errors.New("the machine was saved")
	})
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", m.name, err)
	}
	return nil
}

// moveFile renames src to dst, copying it when the two are on different
// file systems; dst is written whole or not at all.
func moveFile(src, dst string) error {
	if err := os.Rename(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".move-*")
	if err != nil {
		return err
	}
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := errors.Join(tmp.Sync(), tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Remove(src)
}

// Client returns the connection to the guest agent.
func (m *Machine) Client() *guestconn.Client { return m.client }

// Console returns the serial console's output so far (at most its last
// MiB, and at most what its log keeps).
func (m *Machine) Console() []byte { return m.readConsole(1 << 20) }

// NetStats returns what the guest has sent on its network device so
// far, when the machine's Network counts it (Sink does; another Network
// does when it has a method Stats() NetStats), else zero. It stays
// readable after Stop.
func (m *Machine) NetStats() NetStats {
	if s, ok := m.network.(interface{ Stats() NetStats }); ok {
		return s.Stats()
	}
	return NetStats{}
}

// NetErr returns the error the machine's Network ended with while the
// machine ran (a Sink's: a stream whose framing broke). It is nil while
// the Network serves, when Serve returned nil or io.EOF (QEMU closed the
// connection), and for however Serve ended once Stop was called.
func (m *Machine) NetErr() error {
	if m.net == nil {
		return nil
	}
	return m.net.Err()
}

// Done is closed once QEMU has exited.
func (m *Machine) Done() <-chan struct{} { return m.proc.Done() }

// Exec runs a process in the guest and waits for it (guestconn.Client.Exec).
func (m *Machine) Exec(ctx context.Context, cmd guestconn.Cmd) (*guestconn.ExitStatus, error) {
	return m.client.Exec(ctx, cmd)
}

// StartProcess starts a process in the guest (guestconn.Client.Start).
func (m *Machine) StartProcess(ctx context.Context, cmd guestconn.Cmd) (*guestconn.Process, error) {
	return m.client.Start(ctx, cmd)
}

// Put writes a file in the guest (guestconn.Client.Put).
func (m *Machine) Put(ctx context.Context, r io.Reader, dest string, mode fs.FileMode, owner *guestconn.Owner) error {
	return m.client.Put(ctx, r, dest, mode, owner)
}

// Get reads a file from the guest (guestconn.Client.Get).
func (m *Machine) Get(ctx context.Context, path string, w io.Writer) (*guestconn.FileInfo, error) {
	return m.client.Get(ctx, path, w)
}

// Stop powers the guest off and removes the machine's directory. It asks
// the agent to power off and waits for QEMU to exit, at most the stop
// timeout or until ctx ends; then it kills QEMU's process group. It
// returns once QEMU is gone, and reports a guest that had to be killed.
// Calling it again returns the first call's result.
func (m *Machine) Stop(ctx context.Context) error {
	m.stopOnce.Do(func() {
		m.stopErr = m.stop(ctx)
	})
	return m.stopErr
}

func (m *Machine) stop(ctx context.Context) error {
	if m.net != nil {
		m.net.stop()
	}
	var errs []error
	select {
	case <-m.proc.Done():
	default:
		ctx, cancel := context.WithTimeout(ctx, m.stopTO)
		defer cancel()
		line := []byte(bootproto.ControlLine(bootproto.ControlPowerOff))
		m.control.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := m.control.Write(line); err != nil {
			errs = append(errs, fmt.Errorf("asking the guest to power off: %w", err))
		} else if err := m.proc.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("the guest did not power off within %v; killed it", m.stopTO)
			}
			errs = append(errs, err)
		} else {
			m.poweredOff = true
		}
	}
	if m.keepDisk != "" && m.poweredOff {
		m.proc.Kill()
		if err := moveFile(filepath.Join(m.dir, OverlayFile), m.keepDisk); err != nil {
			errs = append(errs, fmt.Errorf("keeping the root disk: %w", err))
		}
	}
	m.kill()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stopping sandbox %s: %w", m.name, err)
	}
	return nil
}

// kill ends QEMU if it runs, closes the connections and removes the
// directory.
func (m *Machine) kill() {
	if m.client != nil {
		m.client.Close()
	}
	if m.proc != nil {
		m.proc.Kill()
	}
	if m.control != nil {
		m.control.Close()
	}
	m.stopPorts()
	if m.net != nil {
		m.net.close()
	}
	if m.console != nil {
		m.console.close()
	}
	if m.keep != "" {
		consolelog.Move(filepath.Join(m.dir, ConsoleFile), m.keep, m.keepMax)
	}
	if m.ram != nil {
		m.ram.Close() // QEMU, now gone, held the other reference
	}
	os.RemoveAll(m.dir)
}

// AddFS gives the running machine a file system device in slot (0 to
// Options.FSSlots-1) which its guest finds by tag ("mount -t virtiofs
// tag dir"), served by the vhost-user backend at the other end of the
// connected unix socket sock. The backend must be serving: the
// hypervisor speaks to it while it adds the device. The guest's kernel
// finds the device on its own shortly after AddFS returns. ctx bounds
// the exchange with the hypervisor.
func (m *Machine) AddFS(ctx context.Context, slot int, tag string, sock *os.File) error {
	fsr, ok := m.hv.(FileSharer)
	if !ok {
		return fmt.Errorf("sandbox %s: the hypervisor cannot add file system devices", m.name)
	}
	if err := fsr.AddFS(ctx, m.proc, slot, tag, sock); err != nil {
		return fmt.Errorf("sandbox %s: %w", m.name, err)
	}
	return nil
}
