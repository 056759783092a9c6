package qemu

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sbx-dev/sbx/internal/proto/bootproto"
	"github.com/sbx-dev/sbx/platform"
)

// Virtio-serial port names the guest sees under /dev/virtio-ports/.
const (
	// AgentPortName is the port of the guest agent's protocol; the
	// name is the boot contract's (bootproto.AgentPort), which the
	// agent looks for.
	AgentPortName = bootproto.AgentPort
)

// Requirements on QEMU.
const (
	// NetStreamMajor and NetStreamMinor are the first QEMU version with
	// "-netdev stream", which connects the guest's network device to the
	// host's userspace network stack over a unix socket.
	NetStreamMajor, NetStreamMinor = 7, 2
	// maxUnixPath is the longest unix socket path Linux accepts
	// (sun_path is 108 bytes, NUL included).
	maxUnixPath = 107
	// maxPorts is how many ports one virtio-serial device holds by
	// default.
	maxPorts = 31
	// DenseMajor and DenseMinor are the first QEMU version with both a
	// bounded translation buffer ("-accel tcg,tb-size", 5.0) and free
	// page reporting on the balloon device (5.1). An older QEMU runs the
	// machine as Legacy does.
	DenseMajor, DenseMinor = 5, 1
)

// TCGBufferMiB is the size of TCG's translation buffer, the host memory
// that holds the guest code QEMU has translated, when the machine runs
// under TCG. QEMU's default is 1 GiB, of which an idle sbx guest keeps
// 56 to 64 MiB resident after boot, and a busy one more, for good; a
// full buffer is flushed and refilled, which costs time, not
// correctness. docs/decisions/0009-density.md has the measurements
// behind the size.
const TCGBufferMiB = 16

// VirtFSTag is the 9p mount tag of VMSpec.VirtFS.
const VirtFSTag = "virtfs0"

// VMSpec is one virtual machine as QEMU should run it: what Command turns
// into an argument vector. Paths are used as given.
type VMSpec struct {
	// Name names the machine in QEMU's process title and messages.
	Name string `json:"name"`
	// Platform is the guest's platform; its architecture picks the
	// emulator and machine type.
	Platform platform.Platform `json:"platform"`
	// CPUs is the number of virtual CPUs, at least 1.
	CPUs int `json:"cpus"`
	// MemoryBytes is the guest's memory, a whole number of MiB.
	MemoryBytes int64 `json:"memory_bytes"`

	// Kernel and Initrd are the files QEMU loads directly, without a
	// boot loader. Kernel is empty only for a machine started Paused
	// that is never to boot (tests of the machinery around QEMU).
	Kernel string `json:"kernel,omitempty"`
	Initrd string `json:"initrd,omitempty"`
	// Cmdline holds kernel parameters (from bootproto.Config.Params,
	// for example), appended after the console and panic parameters
	// Command adds.
	Cmdline []string `json:"cmdline,omitempty"`
	// RootDisk is the root disk, a qcow2 image (usually a per-sandbox
	// copy-on-write overlay over the image's disk), the guest's first
	// virtio-blk disk (/dev/vda).
	RootDisk string `json:"root_disk,omitempty"`

	// ConsoleSocket is the unix socket the serial console is connected
	// to: QEMU connects to it as it starts, so it must be listening
	// before, and sends it everything the guest writes to its console.
	// Whoever listens keeps the console, and must read it: a console
	// nobody reads makes the guest wait. Empty means no serial port.
	// (QEMU writing the console to a file itself would let the guest
	// fill the host's disk.)
	ConsoleSocket string `json:"console_socket,omitempty"`
	// QMPSocket is the unix socket QEMU listens on for QMP. Required.
	QMPSocket string `json:"qmp_socket"`
	// AgentSocket is the unix socket QEMU listens on for the guest
	// agent's virtio-serial port (AgentPortName); empty means no agent
	// port.
	AgentSocket string `json:"agent_socket,omitempty"`
	// Ports are further virtio-serial ports: the name the guest sees →
	// the unix socket QEMU listens on for it.
	Ports map[string]string `json:"ports,omitempty"`
	// NetSocket is the unix socket of the host's userspace network
	// stack, which must be listening before QEMU starts; QEMU connects
	// to it with "-netdev stream" (QEMU 7.2 or later). Empty means the
	// guest has no network device at all.
	NetSocket string `json:"net_socket,omitempty"`
	// UserNetwork gives the network device QEMU's own user-mode network
	// ("-netdev user") instead of NetSocket: the guest reaches the
	// host's network, its loopback at 10.0.2.2, with no policy at all.
	// It is for comparisons only (benchmarks against the baseline users
	// know); sandboxes never use it. It excludes NetSocket.
	UserNetwork bool `json:"user_network,omitempty"`
	// VirtFS, when set, is a host directory QEMU exports itself with its
	// own 9p server ("-virtfs local", security_model=none), which the
	// guest mounts by the tag VirtFSTag. It is for comparisons only
	// (bench/vfsbench measures workspace mounts against it): it applies
	// no rules and follows the host's links; sandboxes never use it.
	VirtFS string `json:"virtfs,omitempty"`
	// MAC is the network device's address; empty derives a locally
	// administered one from Name.
	MAC string `json:"mac,omitempty"`
	// Paused starts the machine with its CPUs stopped ("-S") until a
	// QMP "cont".
	Paused bool `json:"paused,omitempty"`
	// Incoming starts the machine waiting for a migration stream
	// ("-incoming defer"), which Process.Restore then feeds it; it runs
	// once the state is loaded.
	Incoming bool `json:"incoming,omitempty"`
	// FSSlots is how many PCIe root ports the machine has for the file
	// system devices Process.AddFS plugs in while it runs, one each.
	// They are part of the machine's shape: a snapshot's machine and
	// the one restored from it have the same number. amd64 (q35) only;
	// zero adds none.
	FSSlots int `json:"fs_slots,omitempty"`
	// Memory, when set, backs guest RAM with a file
	// ("memory-backend-file"); nil is anonymous memory.
	Memory *Memory `json:"memory,omitempty"`
	// RootBacking, when set, is handed to QEMU as descriptor
	// vm.BackingFD (Launch passes it): the RootDisk overlay names it
	// as its backing file by vm.BackingPath.
	RootBacking *os.File `json:"-"`
	// TCGBufferMiB sizes TCG's translation buffer when the machine runs
	// under TCG; zero means the package's TCGBufferMiB. Benchmarks set
	// it to measure what the size costs.
	TCGBufferMiB int `json:"tcg_buffer_mib,omitempty"`
	// Legacy runs the machine as sbx did before decision 0009
	// (docs/decisions/0009-density.md): a q35 with its SATA controller,
	// SMBus, VMware port and SMM, QEMU's default 1 GiB translation
	// buffer under TCG, and no balloon device, so that memory the guest
	// frees stays with QEMU. It is for comparisons only
	// (bench/densitybench); sandboxes never use it.
	Legacy bool `json:"legacy,omitempty"`

	// QEMULog is where Launch sends QEMU's own standard output and
	// error; empty keeps their last few KiB in memory for error
	// messages only. Command does not use it.
	QEMULog string `json:"qemu_log,omitempty"`
}

// Memory is a file that backs a guest's RAM.
type Memory struct {
	// Path is the file's path. When File is set, QEMU is handed File
	// as its descriptor MemoryFD (Launch passes it) and maps
	// /proc/self/fd/MemoryFD; Path then only names it.
	Path string   `json:"path"`
	File *os.File `json:"-"`
	// Shared maps the file shared ("share=on"); else QEMU maps it
	// private, copy-on-write.
	Shared bool `json:"shared,omitempty"`
}

// MemoryFD is the descriptor number a Memory.File has in QEMU.
const MemoryFD = 3

// memPath is where QEMU finds the RAM file.
func (m *Memory) memPath() string {
	if m.File != nil {
		return "/proc/self/fd/" + strconv.Itoa(MemoryFD)
	}
	return m.Path
}

// machine is what differs between guest architectures.
type machine struct {
	machine string // -machine
	legacy  string // -machine for VMSpec.Legacy
	console string // the serial console's kernel device
}

// machines holds the machine for each guest architecture.
//
// On x86 the machine is q35, with virtio devices on PCI, without the
// built-in devices sbx never uses: the SATA controller, the SMBus
// controller, the VMware I/O port and System Management Mode. QEMU's
// microvm was measured here against it and not taken: with Debian's
// generic kernel (virtio_mmio a module, no VIRTIO_MMIO_CMDLINE_DEVICES)
// it boots only with PCIe on ("microvm,pcie=on"), and then holds as much
// host memory as this q35 (decision 0009); plain microvm never got past
// TSC calibration in 60 s under TCG.
var machines = map[string]machine{
	"amd64": {machine: "q35,sata=off,smbus=off,vmport=off,smm=off", legacy: "q35", console: "ttyS0"},
	"arm64": {machine: "virt", legacy: "virt", console: "ttyAMA0"},
}

var (
	portNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	macRE      = regexp.MustCompile(`^[0-9a-f]{2}(:[0-9a-f]{2}){5}$`)
)

// Command returns the argument vector that runs spec on host, its first
// element the emulator's path. It only computes: it neither looks at the
// file system nor runs anything, so the same inputs always give the same
// vector. It fails when the spec is incomplete or asks for what the
// host's QEMU cannot do (a network device on QEMU older than 7.2, an
// architecture with no emulator).
//
// The machine has no default devices, no display, no user-mode network
// unless spec.UserNetwork asks for it, and no way to reboot: a guest
// reboot or kernel panic ends QEMU. Unless spec.Legacy asks otherwise (or
// QEMU is older than 5.1), it is sized for density: TCG's translation
// buffer is TCGBufferMiB, and a balloon device with free page reporting
// lets the guest return the memory it frees.
func Command(spec VMSpec, host Host) ([]string, error) {
	where := fmt.Sprintf("VM %q", spec.Name)
	if spec.Name == "" {
		return nil, fmt.Errorf("VM spec has no name")
	}
	arch := spec.Platform.Architecture
	if spec.Platform.OS != "linux" {
		return nil, fmt.Errorf("%s: platform %s: guests must be linux", where, spec.Platform)
	}
	m, ok := machines[arch]
	if !ok {
		return nil, fmt.Errorf("%s: platform %s: sbx runs amd64 and arm64 guests only", where, spec.Platform)
	}
	bin, ok := host.QEMU[arch]
	if !ok {
		name, _ := EmulatorName(arch)
		return nil, fmt.Errorf("%s: platform %s needs %s, which this host does not have", where, spec.Platform, name)
	}
	if spec.CPUs < 1 {
		return nil, fmt.Errorf("%s: cpus is %d; it must be at least 1", where, spec.CPUs)
	}
	const mib = 1 << 20
	if spec.MemoryBytes <= 0 || spec.MemoryBytes%mib != 0 {
		return nil, fmt.Errorf("%s: memory of %d bytes is not a positive whole number of MiB", where, spec.MemoryBytes)
	}
	if spec.Memory != nil && spec.Memory.Path == "" && spec.Memory.File == nil {
		return nil, fmt.Errorf("%s: a memory file with no path", where)
	}
	if spec.Kernel == "" && !spec.Paused {
		return nil, fmt.Errorf("%s: no kernel to boot", where)
	}
	if spec.Kernel == "" && (spec.Initrd != "" || len(spec.Cmdline) > 0) {
		return nil, fmt.Errorf("%s: an initrd or kernel parameters without a kernel", where)
	}
	for _, p := range spec.Cmdline {
		if p == "" || strings.ContainsAny(p, "\n\x00") {
			return nil, fmt.Errorf("%s: kernel parameter %q is empty or holds a line break", where, p)
		}
	}
	if spec.QMPSocket == "" {
		return nil, fmt.Errorf("%s: no QMP socket", where)
	}
	sockets := map[string]string{"QMP socket": spec.QMPSocket, "agent socket": spec.AgentSocket, "network socket": spec.NetSocket, "console socket": spec.ConsoleSocket}
	for name, path := range spec.Ports {
		if !portNameRE.MatchString(name) {
			return nil, fmt.Errorf("%s: virtio-serial port name %q: use letters, digits, '.', '_' and '-', 64 at most", where, name)
		}
		if name == AgentPortName {
			return nil, fmt.Errorf("%s: port %q is the agent's; set AgentSocket instead", where, name)
		}
		sockets["socket of port "+name] = path
	}
	if n := len(spec.Ports) + 1; n > maxPorts {
		return nil, fmt.Errorf("%s: %d virtio-serial ports; at most %d fit", where, n, maxPorts)
	}
	for _, what := range slices.Sorted(maps.Keys(sockets)) {
		if p := sockets[what]; len(p) > maxUnixPath {
			return nil, fmt.Errorf("%s: %s %s is %d bytes long; unix socket paths hold at most %d", where, what, p, len(p), maxUnixPath)
		}
	}
	if spec.NetSocket != "" && !bin.Version.AtLeast(NetStreamMajor, NetStreamMinor) {
		return nil, fmt.Errorf("%s: the network device needs QEMU %d.%d or later for -netdev stream; %s is %s",
			where, NetStreamMajor, NetStreamMinor, bin.Path, bin.Version)
	}
	if spec.FSSlots < 0 || spec.FSSlots > MaxFSSlots {
		return nil, fmt.Errorf("%s: %d file system slots; at most %d", where, spec.FSSlots, MaxFSSlots)
	}
	if spec.FSSlots > 0 && arch != "amd64" {
		return nil, fmt.Errorf("%s: file system slots are PCIe root ports of q35, and platform %s has none", where, spec.Platform)
	}
	if spec.TCGBufferMiB < 0 {
		return nil, fmt.Errorf("%s: a translation buffer of %d MiB", where, spec.TCGBufferMiB)
	}
	if spec.UserNetwork && spec.NetSocket != "" {
		return nil, fmt.Errorf("%s: a network socket and the user-mode network both asked for; the one device has one backend", where)
	}
	mac := spec.MAC
	if mac == "" {
		mac = defaultMAC(spec.Name)
	}
	if spec.NetSocket != "" || spec.UserNetwork {
		if hw, err := net.ParseMAC(mac); err != nil || len(hw) != 6 || !macRE.MatchString(strings.ToLower(mac)) {
			return nil, fmt.Errorf("%s: MAC address %q is not of the form 52:54:00:12:34:56", where, mac)
		} else if hw[0]&1 != 0 {
			return nil, fmt.Errorf("%s: MAC address %q is a multicast address", where, mac)
		}
	}

	// The density settings of decision 0009 need QEMU 5.1.
	dense := !spec.Legacy && bin.Version.AtLeast(DenseMajor, DenseMinor)
	machineOpt := m.legacy
	if dense {
		machineOpt = m.machine
	}
	accel := host.Accel(arch)
	cpu := "max"
	if accel != AccelTCG {
		cpu = "host"
	}
	accelOpt := string(accel)
	if accel == AccelTCG && spec.CPUs > 1 {
		accelOpt += ",thread=multi"
	}
	if accel == AccelTCG && dense {
		tb := spec.TCGBufferMiB
		if tb == 0 {
			tb = TCGBufferMiB
		}
		accelOpt += ",tb-size=" + strconv.Itoa(tb)
	}

	argv := []string{bin.Path,
		"-name", optValue(spec.Name),
		"-no-user-config", "-nodefaults", "-display", "none", "-no-reboot",
	}
	if bin.Sandbox {
		argv = append(argv, "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny")
	}
	if spec.Memory != nil {
		// The machine's RAM is the file: guest memory in it from the
		// first page, so that a migration with x-ignore-shared leaves
		// it out of the stream (Process.Save) and a warm start maps it
		// back (Process.Restore).
		share := "off"
		if spec.Memory.Shared {
			share = "on"
		}
		argv = append(argv, "-object", "memory-backend-file,id=ram0,size="+strconv.FormatInt(spec.MemoryBytes/mib, 10)+"M,share="+share+",mem-path="+optValue(spec.Memory.memPath()))
		machineOpt += ",memory-backend=ram0"
	}
	argv = append(argv,
		"-machine", machineOpt,
		"-accel", accelOpt,
		"-cpu", cpu,
		"-smp", strconv.Itoa(spec.CPUs),
		"-m", strconv.FormatInt(spec.MemoryBytes/mib, 10),
	)
	if spec.Paused {
		argv = append(argv, "-S")
	}
	if spec.Incoming {
		argv = append(argv, "-incoming", "defer")
	}
	argv = append(argv,
		"-chardev", "socket,id=qmp,path="+optValue(spec.QMPSocket)+",server=on,wait=off",
		"-mon", "chardev=qmp,mode=control",
	)
	if spec.ConsoleSocket != "" {
		argv = append(argv,
			"-chardev", "socket,id=console,path="+optValue(spec.ConsoleSocket)+",server=off",
			"-serial", "chardev:console",
		)
	}
	if spec.Kernel != "" {
		argv = append(argv, "-kernel", spec.Kernel)
		if spec.Initrd != "" {
			argv = append(argv, "-initrd", spec.Initrd)
		}
		params := []string{"console=" + m.console, "panic=-1"}
		if dense && accel == AccelTCG && arch == "amd64" {
			// The x86 kernel checks that the IO-APIC delivers the
			// timer by timing a few ticks; an emulated CPU on a busy
			// host (many sandboxes booting at once) misses them now
			// and then, and the kernel panics ("IO-APIC + timer
			// doesn't work"). QEMU's timer does work.
			params = append(params, "no_timer_check")
		}
		params = append(params, spec.Cmdline...)
		argv = append(argv, "-append", strings.Join(params, " "))
	}
	if spec.RootDisk != "" {
		// Writeback caching: the guest's flushes reach the disk, so an
		// overlay that outlives a crash of the host process is intact.
		argv = append(argv,
			"-drive", "if=none,id=root,format=qcow2,cache=writeback,discard=unmap,file="+optValue(spec.RootDisk),
			"-device", "virtio-blk-pci,drive=root",
		)
	}
	if spec.AgentSocket != "" || len(spec.Ports) > 0 {
		argv = append(argv, "-device", "virtio-serial-pci,id=vser0")
		type port struct{ name, path string }
		var ports []port
		if spec.AgentSocket != "" {
			ports = append(ports, port{AgentPortName, spec.AgentSocket})
		}
		for _, name := range slices.Sorted(maps.Keys(spec.Ports)) {
			ports = append(ports, port{name, spec.Ports[name]})
		}
		for i, p := range ports {
			id := "port" + strconv.Itoa(i)
			argv = append(argv,
				"-chardev", "socket,id="+id+",path="+optValue(p.path)+",server=on,wait=off",
				"-device", "virtserialport,bus=vser0.0,nr="+strconv.Itoa(i+1)+",chardev="+id+",name="+p.name+",id=v"+id,
			)
		}
	}
	for i := range spec.FSSlots {
		// Hot-pluggable, each its own chassis and slot, as PCIe
		// requires of root ports.
		argv = append(argv, "-device", fmt.Sprintf("pcie-root-port,id=%s,chassis=%d,slot=%d", fsSlotID(i), i+1, i+1))
	}
	if spec.VirtFS != "" {
		argv = append(argv, "-virtfs", "local,path="+optValue(spec.VirtFS)+",mount_tag="+VirtFSTag+",security_model=none,id="+VirtFSTag)
	}
	argv = append(argv,
		"-object", "rng-random,id=rng0,filename=/dev/urandom",
		"-device", "virtio-rng-pci,rng=rng0",
	)
	if dense {
		// The balloon is never inflated: it is there for free page
		// reporting, through which the guest's kernel hands the pages
		// it frees (in blocks of 2 MiB or more) back to QEMU, which
		// gives them back to the host. The guest can only hand over
		// its own memory.
		argv = append(argv, "-device", "virtio-balloon-pci,free-page-reporting=on")
	}
	switch {
	case spec.UserNetwork:
		argv = append(argv,
			"-netdev", "user,id=net0",
			"-device", "virtio-net-pci,netdev=net0,mac="+strings.ToLower(mac),
		)
	case spec.NetSocket == "":
		argv = append(argv, "-nic", "none")
	default:
		argv = append(argv,
			"-netdev", "stream,id=net0,server=off,addr.type=unix,addr.path="+optValue(spec.NetSocket),
			"-device", "virtio-net-pci,netdev=net0,mac="+strings.ToLower(mac),
		)
	}
	return argv, nil
}

// optValue escapes a value inside a QEMU option list, where a comma
// separates options and ",," stands for a comma.
func optValue(s string) string {
	return strings.ReplaceAll(s, ",", ",,")
}

// defaultMAC derives a stable, locally administered unicast address from
// a machine's name.
func defaultMAC(name string) string {
	sum := sha256.Sum256([]byte("sbx mac\x00" + name))
	sum[0] = sum[0]&^1 | 2 // unicast, locally administered
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", sum[0], sum[1], sum[2], sum[3], sum[4], sum[5])
}
