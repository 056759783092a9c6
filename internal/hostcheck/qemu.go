package hostcheck

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/internal/machine/qemu"
)

// qemuDevices are the devices qemu.Command (internal/machine/qemu) gives every
// machine: the root disk, the agent's and other ports, the entropy
// source, the network device and the balloon that returns freed memory.
var qemuDevices = []string{"virtio-blk-pci", "virtio-serial-pci", "virtserialport", "virtio-rng-pci", "virtio-net-pci", "virtio-balloon-pci"}

// kvmDevice is the device QEMU uses KVM through.
const kvmDevice = "/dev/kvm"

// checkQEMU probes the emulators with internal/machine/qemu's Prober and checks
// one per architecture in archs (the host's first), then acceleration.
func checkQEMU(ctx context.Context, opts *Options, pm PackageManager, archs []string) []Result {
	path := opts.getenv("PATH")
	p := qemu.Prober{Path: path, NoCache: true, Timeout: opts.AccelTimeout}
	if path == "" {
		// The Prober reads an empty Path as $PATH; a list of empty
		// entries finds nothing, as an empty PATH does.
		p.Path = string(os.PathListSeparator)
	}
	host, probeErr := p.Probe(ctx)
	var out []Result
	for i, arch := range archs {
		name := "qemu"
		if i > 0 {
			name = "qemu-" + arch
		}
		out = append(out, checkEmulator(ctx, opts, pm, name, arch, host, probeErr, path))
	}
	return append(out, checkAccel(host, probeErr, kvmDevice), checkMounts(host, probeErr))
}

// envMountTransport chooses the mounts' transport
// (sandboxfs.EnvTransport, which this package does not link).
const envMountTransport = "SBX_MOUNT_TRANSPORT"

// checkMounts reports how workspace mounts reach guests of the host's
// architecture: over virtio-fs where the host can run it, over 9P (a
// relay in the guest, several times slower for git and builds)
// elsewhere, with why, and the fix where there is one.
func checkMounts(host qemu.Host, probeErr error) Result {
	r := Result{Name: "mounts"}
	bin, ok := host.QEMU[host.Arch]
	if probeErr != nil || !ok {
		r.Status = Fail
		r.Detail = "not probed: no QEMU for the host's architecture (" + runtime.GOARCH + ")"
		r.Fix = "install QEMU first (see the qemu check)"
		return r
	}
	err := host.FileSharing(host.Arch)
	if err == nil {
		r.Status = OK
		r.Detail = fmt.Sprintf("virtio-fs (%s has vhost-user-fs-pci)", bin.Path)
		return r
	}
	r.Detail = "9P, which is slower for git and builds: " + err.Error()
	if host.OS == "linux" && host.Arch == "amd64" {
		// Only the device is missing: a QEMU build with vhost-user has it.
		r.Status = Warn
		r.Fix = "install a QEMU built with vhost-user (Debian's and Fedora's are), or set " + envMountTransport + "=9p to choose 9P"
		return r
	}
	r.Status = OK
	return r
}

func checkEmulator(ctx context.Context, opts *Options, pm PackageManager, name, arch string, host qemu.Host, probeErr error, path string) Result {
	r := Result{Name: name}
	emu, ok := qemu.EmulatorName(arch)
	if !ok {
		r.Status = Fail
		r.Detail = fmt.Sprintf("sbx runs no guests of architecture %s", arch)
		r.Fix = "use platform linux/amd64 or linux/arm64"
		return r
	}
	install, hasCmd := pm.install("qemu-" + arch)
	if !hasCmd {
		install = fmt.Sprintf("install QEMU %d.%d or later (%s) with this system's package manager", qemu.NetStreamMajor, qemu.NetStreamMinor, emu)
	}
	bin, found := host.QEMU[arch]
	if !found {
		r.Status = Fail
		r.Fix = install
		if _, onPath := lookPath(emu, path); onPath && probeErr != nil {
			r.Detail = fmt.Sprintf("%s does not run: %v", emu, probeErr)
			return r
		}
		r.Detail = fmt.Sprintf("%s not found in PATH (%s); sbx run and apply need it", emu, displayPath(path))
		return r
	}
	r.Detail = fmt.Sprintf("%s %s", bin.Path, bin.Version)
	var problems []string
	if !bin.Version.AtLeast(qemu.NetStreamMajor, qemu.NetStreamMinor) {
		problems = append(problems, fmt.Sprintf("QEMU %d.%d or later is needed for -netdev stream", qemu.NetStreamMajor, qemu.NetStreamMinor))
	}
	devices, err := qemuHelp(ctx, opts, bin.Path, "-device")
	if err != nil {
		problems = append(problems, err.Error())
	} else if missing := missingDevices(devices); len(missing) > 0 {
		problems = append(problems, "it lacks the device(s) "+strings.Join(missing, ", "))
	}
	netdevs, err := qemuHelp(ctx, opts, bin.Path, "-netdev")
	if err != nil {
		problems = append(problems, err.Error())
	} else if !hasNetdev(netdevs, "stream") {
		problems = append(problems, "it lacks -netdev stream")
	}
	if len(problems) > 0 {
		r.Status = Fail
		r.Detail += ": " + strings.Join(problems, "; ")
		r.Fix = install
		if up, ok := pm.upgrade("qemu-" + arch); ok {
			r.Fix = up
		}
		return r
	}
	r.Status = OK
	r.Detail += ", with " + strings.Join(qemuDevices, ", ") + " and -netdev stream"
	return r
}

// qemuHelp runs "EMULATOR -machine none OPTION help" and returns its
// standard output.
func qemuHelp(ctx context.Context, opts *Options, bin, option string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-machine", "none", option, "help")
	cmd.Env = qemu.Environment(opts.Environ)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s -machine none %s help: %v: %s", bin, option, err, firstLine(stderr.String()))
	}
	return string(out), nil
}

// missingDevices returns the devices of qemuDevices that the output of
// "-device help" does not list (`name "virtio-blk-pci", bus PCI, ...`).
func missingDevices(help string) []string {
	have := map[string]bool{}
	for line := range strings.Lines(help) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), `name "`); ok {
			if i := strings.IndexByte(rest, '"'); i > 0 {
				have[rest[:i]] = true
			}
		}
	}
	var missing []string
	for _, d := range qemuDevices {
		if !have[d] {
			missing = append(missing, d)
		}
	}
	return missing
}

// hasNetdev reports whether the output of "-netdev help" (a heading, then
// one backend per line) lists backend.
func hasNetdev(help, backend string) bool {
	for line := range strings.Lines(help) {
		if strings.TrimSpace(line) == backend {
			return true
		}
	}
	return false
}

// checkAccel reports the accelerator the probe found for guests of the
// host's architecture, and when it is TCG, why, with the fix; kvm is the
// KVM device on Linux.
func checkAccel(host qemu.Host, probeErr error, kvm string) Result {
	r := Result{Name: "accel"}
	if _, ok := host.QEMU[host.Arch]; probeErr != nil || !ok || len(host.Accels) == 0 {
		r.Status = Fail
		r.Detail = "not probed: no QEMU for the host's architecture (" + runtime.GOARCH + ") to probe with"
		r.Fix = "install QEMU first (see the qemu check)"
		return r
	}
	if a := host.Accels[0]; a != qemu.AccelTCG {
		r.Status = OK
		r.Detail = fmt.Sprintf("%s: a test guest ran under it", strings.ToUpper(string(a)))
		return r
	}
	r.Status = Warn
	const slow = "sandboxes run under TCG, which works but boots and runs several times slower"
	switch runtime.GOOS {
	case "linux":
		fi, err := os.Stat(kvm)
		switch {
		case err != nil:
			r.Detail = fmt.Sprintf("%s does not exist (no KVM in this kernel, virtualization off in the firmware, or a VM without nested virtualization); %s", kvm, slow)
			r.Fix = "enable virtualization (VT-x or AMD-V) in the firmware, or nested virtualization for this VM, then: " + sudo() + "modprobe kvm_intel (or kvm_amd)"
		case !opensReadWrite(kvm):
			group := deviceGroup(fi)
			r.Detail = fmt.Sprintf("%s does not open read-write for this user (mode %04o, group %s); %s", kvm, fi.Mode().Perm(), group, slow)
			r.Fix = "sudo usermod -aG " + group + " $USER, then log in again"
			if fi.Mode().Perm()&0o060 != 0o060 || group == "root" {
				// No group may use it: give it the kvm group first.
				r.Fix = "sudo groupadd -f kvm && sudo chgrp kvm " + kvm + " && sudo chmod 660 " + kvm +
					" && sudo usermod -aG kvm $USER, then log in again"
			}
		default:
			r.Detail = strings.TrimSuffix(host.Note, "; using TCG")
			if r.Detail == "" {
				r.Detail = "KVM is present but unusable"
			}
			r.Detail += "; " + slow
			r.Fix = "nothing to run on this host, sbx uses TCG; for KVM, enable VT-x or AMD-V in the firmware, or nested virtualization for this VM"
		}
	case "darwin":
		r.Detail = strings.TrimSuffix(host.Note, "; using TCG") + "; " + slow
		r.Fix = "none on this Mac: the Hypervisor framework is not available (sysctl kern.hv_support)"
	default:
		r.Detail = "sbx uses KVM on Linux and HVF on macOS only; " + slow
		r.Fix = "none on this OS"
	}
	return r
}

func opensReadWrite(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// deviceGroup returns the name of the group that owns the device, or
// "kvm", the usual one, when it is root's or has no name (the fix then
// gives the device that group).
func deviceGroup(fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Gid == 0 {
		return "kvm"
	}
	g, err := user.LookupGroupId(strconv.FormatUint(uint64(st.Gid), 10))
	if err != nil {
		return "kvm"
	}
	return g.Name
}

func displayPath(path string) string {
	if strings.Trim(path, string(os.PathListSeparator)) == "" {
		return "empty"
	}
	return path
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
