package qemu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/sbx-dev/sbx/internal/atomicfile"
)

// DefaultAccelProbeTimeout is how long the accelerator probe lets its test
// guest run. A working KVM runs it in well under a second; on a host
// whose KVM hangs guests it never finishes.
const DefaultAccelProbeTimeout = 3 * time.Second

// Prober finds what the host offers. The zero value is ready to use and
// is what Probe uses.
type Prober struct {
	// Path is the list of directories searched for the emulators, in
	// the form of $PATH. Empty means $PATH.
	Path string
	// CacheDir holds accelerator verdicts, one file per boot of the host
	// and QEMU binary and version, so that only the first probe after a
	// boot runs a test guest. Empty means "sbx/qemu" in the user's cache
	// directory.
	CacheDir string
	// NoCache makes the probe neither read nor write verdicts.
	NoCache bool
	// Timeout bounds the accelerator's test guest; zero means
	// DefaultAccelProbeTimeout.
	Timeout time.Duration
}

// Probe finds the host's QEMU system emulators and decides which
// accelerators really work, with a Prober's defaults.
func Probe(ctx context.Context) (Host, error) {
	return Prober{}.Probe(ctx)
}

// Probe finds the QEMU system emulators (qemu-system-x86_64,
// qemu-system-aarch64), their versions and features, and decides which
// accelerators work for guests of the host's architecture: KVM on Linux
// only when /dev/kvm opens read-write, the CPU has virtualization
// extensions and a test guest really runs under it; HVF on macOS when the
// kernel supports it; TCG otherwise, with a Note saying why. It fails only
// when no emulator is found or one cannot be run.
func (p Prober) Probe(ctx context.Context) (Host, error) {
	h := Host{OS: runtime.GOOS, Arch: runtime.GOARCH, QEMU: map[string]Binary{}}
	var names []string
	for _, arch := range slices.Sorted(maps.Keys(emulatorArch)) {
		name, _ := EmulatorName(arch)
		names = append(names, name)
		path, err := p.lookPath(name)
		if err != nil {
			continue
		}
		b, err := inspect(ctx, path)
		if err != nil {
			return Host{}, err
		}
		h.QEMU[arch] = b
	}
	if len(h.QEMU) == 0 {
		err := fmt.Errorf("no QEMU system emulator found (looked for %s in %s)", strings.Join(names, ", "), p.searchPath())
		if cmd := InstallCommand(runtime.GOOS); cmd != "" {
			err = fmt.Errorf("%w; install QEMU with: %s", err, cmd)
		}
		return Host{}, err
	}
	native, ok := h.QEMU[h.Arch]
	if !ok {
		h.Accels = []Accel{AccelTCG}
		return h, nil
	}
	v, cached := p.readVerdict(native)
	if !cached {
		timeout := p.Timeout
		if timeout <= 0 {
			timeout = DefaultAccelProbeTimeout
		}
		v = verdict{}
		if a, note := detectAccel(ctx, native, timeout); a != "" {
			v.Accels = []Accel{a}
		} else {
			v.Note = note
		}
		v.Accels = append(v.Accels, AccelTCG)
		if ctx.Err() != nil {
			// A probe cut short by the caller proves nothing.
			return Host{}, fmt.Errorf("probing QEMU accelerators: %w", ctx.Err())
		}
		p.writeVerdict(native, v)
	}
	h.Accels, h.Note, h.Cached = v.Accels, v.Note, cached
	return h, nil
}

func (p Prober) searchPath() string {
	if p.Path != "" {
		return p.Path
	}
	return os.Getenv("PATH")
}

// lookPath finds an executable in p.Path, or $PATH.
func (p Prober) lookPath(name string) (string, error) {
	if p.Path == "" {
		return exec.LookPath(name)
	}
	for _, dir := range filepath.SplitList(p.Path) {
		if dir == "" {
			continue
		}
		path := filepath.Join(dir, name)
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return path, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s", name, p.Path)
}

// inspect runs an emulator to learn its version, whether it has
// seccomp filtering and whether it has the virtio-fs device.
func inspect(ctx context.Context, path string) (Binary, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	version := exec.CommandContext(ctx, path, "-version")
	version.Env = Environment(os.Environ())
	out, err := version.CombinedOutput()
	if err != nil {
		return Binary{}, fmt.Errorf("%s -version: %v: %s", path, err, strings.TrimSpace(string(out)))
	}
	v, err := ParseVersion(string(out))
	if err != nil {
		return Binary{}, fmt.Errorf("%s -version: %v", path, err)
	}
	helpCmd := exec.CommandContext(ctx, path, "-help")
	helpCmd.Env = Environment(os.Environ())
	help, err := helpCmd.CombinedOutput()
	if err != nil {
		return Binary{}, fmt.Errorf("%s -help: %v: %s", path, err, firstLine(strings.TrimSpace(string(help))))
	}
	// "-device NAME,help" lists the device's properties, or fails
	// when the binary has no such device.
	fsCmd := exec.CommandContext(ctx, path, "-machine", "none", "-device", "vhost-user-fs-pci,help")
	fsCmd.Env = Environment(os.Environ())
	fsHelp, err := fsCmd.Output()
	if ctx.Err() != nil {
		return Binary{}, fmt.Errorf("%s -device vhost-user-fs-pci,help: %w", path, ctx.Err())
	}
	return Binary{
		Path:        path,
		Version:     v,
		Sandbox:     hasOption(string(help), "-sandbox"),
		VhostUserFS: err == nil && strings.HasPrefix(string(fsHelp), "vhost-user-fs-pci options:"),
	}, nil
}

// hasOption reports whether QEMU's -help output documents option.
func hasOption(help, option string) bool {
	for line := range strings.Lines(help) {
		if f := strings.Fields(line); len(f) > 0 && f[0] == option {
			return true
		}
	}
	return false
}

// verdict is the cached outcome of the accelerator probe.
type verdict struct {
	BootID  string  `json:"boot_id"`
	QEMU    string  `json:"qemu"`
	Version Version `json:"version"`
	Accels  []Accel `json:"accels"`
	Note    string  `json:"note,omitempty"`
}

// verdictFile returns the cache file for the binary during this boot, or
// "" when nothing is to be cached.
func (p Prober) verdictFile(b Binary) (path, boot string) {
	if p.NoCache {
		return "", ""
	}
	boot, err := bootID()
	if err != nil || boot == "" {
		return "", ""
	}
	dir := p.CacheDir
	if dir == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			return "", ""
		}
		dir = filepath.Join(d, "sbx", "qemu")
	}
	sum := sha256.Sum256([]byte(strings.Join([]string{boot, runtime.GOOS, runtime.GOARCH, b.Path, b.Version.String()}, "\x00")))
	return filepath.Join(dir, "accel-"+hex.EncodeToString(sum[:8])+".json"), boot
}

func (p Prober) readVerdict(b Binary) (verdict, bool) {
	path, boot := p.verdictFile(b)
	if path == "" {
		return verdict{}, false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return verdict{}, false
	}
	var v verdict
	if err := json.Unmarshal(data, &v); err != nil {
		return verdict{}, false
	}
	if v.BootID != boot || v.QEMU != b.Path || v.Version != b.Version || len(v.Accels) == 0 || v.Accels[len(v.Accels)-1] != AccelTCG {
		return verdict{}, false
	}
	return v, true
}

// writeVerdict caches v. A cache that cannot be written only means the
// next probe runs the test guest again, so errors are not reported.
func (p Prober) writeVerdict(b Binary, v verdict) {
	path, boot := p.verdictFile(b)
	if path == "" {
		return
	}
	v.BootID, v.QEMU, v.Version = boot, b.Path, b.Version
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	_ = atomicfile.WriteBytes(path, append(data, '\n'), 0o644)
}
