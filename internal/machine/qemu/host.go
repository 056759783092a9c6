package qemu

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/sbx-dev/sbx/internal/machine/vm"
)

// Accel is a QEMU accelerator, as named by "-accel": the
// hypervisor-neutral vm.Accel, whose names are QEMU's.
type Accel = vm.Accel

// The accelerators sbx uses. TCG (QEMU's own translator) works everywhere;
// the others only for guests of the host's architecture.
const (
	AccelKVM = vm.AccelKVM // Linux
	AccelHVF = vm.AccelHVF // macOS
	AccelTCG = vm.AccelTCG
)

// Host is what this machine offers for running sandboxes: the QEMU system
// emulators it has and the accelerators that really work. Probe finds it;
// Command only reads it, so tests describe hosts as data.
type Host struct {
	// OS and Arch are the host's, in Go's names (runtime.GOOS and
	// runtime.GOARCH: "linux", "amd64").
	OS   string `json:"os"`
	Arch string `json:"arch"`
	// QEMU holds the system emulator for each guest architecture it
	// found, keyed by the architecture's OCI name ("amd64", "arm64").
	QEMU map[string]Binary `json:"qemu"`
	// Accels are the accelerators usable for guests of the host's own
	// architecture, best first. It always ends with AccelTCG when a QEMU
	// was found.
	Accels []Accel `json:"accels"`
	// Note says why an accelerator the host appears to have is not in
	// Accels ("KVM present but unusable: ...; using TCG"), or is empty.
	Note string `json:"note,omitempty"`
	// Cached reports that the accelerator verdict came from the cache
	// of an earlier probe during this boot of the host.
	Cached bool `json:"cached,omitempty"`
}

// Binary is one QEMU system emulator.
type Binary struct {
	Path    string  `json:"path"`
	Version Version `json:"version"`
	// Sandbox reports that the binary has seccomp filtering ("-sandbox").
	Sandbox bool `json:"sandbox"`
	// VhostUserFS reports that the binary has the vhost-user-fs-pci
	// device, which Process.AddFS plugs in.
	VhostUserFS bool `json:"vhost_user_fs"`
}

// FileSharing says why a machine of architecture arch (an OCI name)
// cannot be given file system devices (Process.AddFS) on this host, or
// is nil when it can: the backend maps the guest's RAM, which must be a
// Linux memory file, the slots are PCIe root ports of the amd64
// machine type, and the emulator must have the device.
func (h Host) FileSharing(arch string) error {
	if h.OS != "linux" {
		return fmt.Errorf("virtio-fs devices need a Linux host (the guest's RAM is a shared memory file), not %s", h.OS)
	}
	if arch != "amd64" {
		return fmt.Errorf("sbx gives virtio-fs devices to amd64 machines only, not %s", arch)
	}
	bin, ok := h.QEMU[arch]
	if !ok {
		return fmt.Errorf("no QEMU for %s guests", arch)
	}
	if !bin.VhostUserFS {
		return fmt.Errorf("%s (%s) has no vhost-user-fs-pci device", bin.Path, bin.Version)
	}
	return nil
}

// Accel returns the accelerator for guests of architecture arch (an OCI
// name): the best usable one for the host's own architecture, TCG for
// any other.
func (h Host) Accel(arch string) Accel {
	if arch == h.Arch && len(h.Accels) > 0 {
		return h.Accels[0]
	}
	return AccelTCG
}

// Version is a QEMU version.
type Version struct {
	Major int `json:"major"`
	Minor int `json:"minor"`
	Micro int `json:"micro"`
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Micro) }

// AtLeast reports whether v is major.minor or later.
func (v Version) AtLeast(major, minor int) bool {
	if v.Major != major {
		return v.Major > major
	}
	return v.Minor >= minor
}

var versionRE = regexp.MustCompile(`version (\d+)\.(\d+)(?:\.(\d+))?`)

// ParseVersion reads the version from the output of "qemu-system-ARCH
// -version" ("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7)").
func ParseVersion(out string) (Version, error) {
	m := versionRE.FindStringSubmatch(out)
	if m == nil {
		return Version{}, fmt.Errorf("no QEMU version in %q", firstLine(out))
	}
	var v Version
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	if m[3] != "" {
		v.Micro, _ = strconv.Atoi(m[3])
	}
	return v, nil
}

// emulatorArch maps an OCI architecture to QEMU's name for it, as in
// qemu-system-x86_64.
var emulatorArch = map[string]string{
	"amd64": "x86_64",
	"arm64": "aarch64",
}

// EmulatorName returns the name of the QEMU system emulator for guests of
// architecture arch (an OCI name), and whether sbx runs such guests.
func EmulatorName(arch string) (string, bool) {
	a, ok := emulatorArch[arch]
	if !ok {
		return "", false
	}
	return "qemu-system-" + a, true
}

func firstLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
