package gondolin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/sbx-dev/sbx/internal/atomicfile"
	"github.com/sbx-dev/sbx/internal/build/digest"
)

// File names in a guest-asset directory, as Gondolin names them.
const (
	ManifestFile   = "manifest.json"
	KernelFile     = "vmlinuz-virt"
	InitramfsFile  = "initramfs.cpio.lz4"
	RootfsFile     = "rootfs.ext4"
	KrunKernelFile = "krun-kernel"
	KrunInitrdFile = "krun-empty-initrd"

	// RootfsLabel is the ext4 volume label Gondolin gives its root file
	// system.
	RootfsLabel = "gondolin-root"
)

// buildIDNamespace is Gondolin's fixed namespace for asset build IDs.
var buildIDNamespace = uuid.MustParse("7b6ed0c0-7e7f-4c2a-8b2d-0bf3d5be9d52")

// buildIDPattern is the form Gondolin accepts for a buildId.
var buildIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// Manifest is manifest.json, version 1. Field order follows Gondolin's.
type Manifest struct {
	Version         int              `json:"version"`
	BuildID         string           `json:"buildId"`
	Config          Config           `json:"config"`
	BuildTime       string           `json:"buildTime"`
	Assets          Assets           `json:"assets"`
	Checksums       Checksums        `json:"checksums"`
	RuntimeDefaults *RuntimeDefaults `json:"runtimeDefaults,omitempty"`
}

// Config is the part of Gondolin's build configuration that a manifest
// carries and Gondolin reads back.
type Config struct {
	// Arch is "x86_64" or "aarch64".
	Arch string `json:"arch"`
	// Distro is "alpine" for the images sbx builds.
	Distro          string           `json:"distro"`
	Rootfs          *RootfsConfig    `json:"rootfs,omitempty"`
	RuntimeDefaults *RuntimeDefaults `json:"runtimeDefaults,omitempty"`
}

// RootfsConfig describes the root file system image.
type RootfsConfig struct {
	Label  string `json:"label,omitempty"`
	SizeMb int64  `json:"sizeMb,omitempty"`
}

// RuntimeDefaults are what Gondolin uses when a VM does not say.
type RuntimeDefaults struct {
	// RootfsMode is "readonly", "memory" or "cow".
	RootfsMode string `json:"rootfsMode,omitempty"`
}

// Assets names the files of the directory.
type Assets struct {
	Kernel     string `json:"kernel"`
	Initramfs  string `json:"initramfs"`
	Rootfs     string `json:"rootfs"`
	KrunKernel string `json:"krunKernel,omitempty"`
	KrunInitrd string `json:"krunInitrd,omitempty"`
}

// Checksums are lower-case sha256 hex digests of the assets.
type Checksums struct {
	Kernel     string `json:"kernel"`
	Initramfs  string `json:"initramfs"`
	Rootfs     string `json:"rootfs"`
	KrunKernel string `json:"krunKernel,omitempty"`
	KrunInitrd string `json:"krunInitrd,omitempty"`
}

// BuildID returns the buildId Gondolin derives from the asset checksums
// and the architecture ("" counts as "unknown", as in Gondolin). The krun
// checksums take part only when set.
func BuildID(c Checksums, arch string) string {
	if arch == "" {
		arch = "unknown"
	}
	lines := []string{
		"gondolin-asset-build",
		"kernel=" + c.Kernel,
		"initramfs=" + c.Initramfs,
		"rootfs=" + c.Rootfs,
	}
	if c.KrunKernel != "" {
		lines = append(lines, "krunKernel="+c.KrunKernel)
	}
	if c.KrunInitrd != "" {
		lines = append(lines, "krunInitrd="+c.KrunInitrd)
	}
	lines = append(lines, "arch="+arch)
	return uuid.NewSHA1(buildIDNamespace, []byte(strings.Join(lines, "\n"))).String()
}

// NormalizeArch returns Gondolin's name for an architecture given by its
// Gondolin, Go or Node.js name.
func NormalizeArch(arch string) (string, error) {
	switch strings.ToLower(arch) {
	case "x86_64", "amd64", "x64":
		return "x86_64", nil
	case "aarch64", "arm64":
		return "aarch64", nil
	}
	return "", fmt.Errorf("gondolin: architecture %q is not x86_64 or aarch64", arch)
}

// NewManifest describes the guest-asset directory dir: it hashes the
// kernel, initramfs and rootfs under their default names (and the krun
// assets when present), and derives the buildId. buildTime is recorded in
// UTC with milliseconds, as JavaScript's toISOString writes it.
func NewManifest(dir string, cfg Config, buildTime time.Time) (Manifest, error) {
	arch, err := NormalizeArch(cfg.Arch)
	if err != nil {
		return Manifest{}, err
	}
	cfg.Arch = arch
	if cfg.Distro == "" {
		cfg.Distro = "alpine"
	}
	if err := checkRuntimeDefaults(cfg.RuntimeDefaults); err != nil {
		return Manifest{}, err
	}
	m := Manifest{
		Version:   1,
		Config:    cfg,
		BuildTime: buildTime.UTC().Format("2006-01-02T15:04:05.000Z"),
		Assets:    Assets{Kernel: KernelFile, Initramfs: InitramfsFile, Rootfs: RootfsFile},
	}
	if cfg.RuntimeDefaults != nil {
		rd := *cfg.RuntimeDefaults
		m.RuntimeDefaults = &rd
	}
	for _, opt := range []struct {
		name string
		set  *string
	}{{KrunKernelFile, &m.Assets.KrunKernel}, {KrunInitrdFile, &m.Assets.KrunInitrd}} {
		if _, err := os.Stat(filepath.Join(dir, opt.name)); err == nil {
			*opt.set = opt.name
		} else if !errors.Is(err, fs.ErrNotExist) {
			return Manifest{}, fmt.Errorf("gondolin: %w", err)
		}
	}
	if m.Checksums, err = hashAssets(dir, m.Assets); err != nil {
		return Manifest{}, err
	}
	m.BuildID = BuildID(m.Checksums, m.Config.Arch)
	return m, nil
}

func checkRuntimeDefaults(rd *RuntimeDefaults) error {
	if rd == nil {
		return nil
	}
	switch rd.RootfsMode {
	case "", "readonly", "memory", "cow":
		return nil
	}
	return fmt.Errorf("gondolin: rootfs mode %q is not readonly, memory or cow", rd.RootfsMode)
}

// hashAssets returns the sha256 digests of the files a names in dir.
func hashAssets(dir string, a Assets) (Checksums, error) {
	var c Checksums
	for _, f := range []struct {
		name string
		sum  *string
	}{
		{a.Kernel, &c.Kernel}, {a.Initramfs, &c.Initramfs}, {a.Rootfs, &c.Rootfs},
		{a.KrunKernel, &c.KrunKernel}, {a.KrunInitrd, &c.KrunInitrd},
	} {
		if f.name == "" {
			continue
		}
		sum, err := hashFile(dir, f.name)
		if err != nil {
			return Checksums{}, err
		}
		*f.sum = sum
	}
	return c, nil
}

func hashFile(dir, name string) (string, error) {
	if !filepath.IsLocal(name) {
		return "", fmt.Errorf("gondolin: asset name %q leaves the directory %s", name, dir)
	}
	// The manifest functions take no context: their callers hash the
	// assets of a finished build, which a cancelled build never reaches.
	sum, _, err := digest.File(context.Background(), filepath.Join(dir, name))
	if err != nil {
		return "", fmt.Errorf("gondolin: %w", err)
	}
	return sum, nil
}

// check reports what would make Gondolin refuse m or disagree with it.
func (m Manifest) check() error {
	if m.Version != 1 {
		return fmt.Errorf("gondolin: manifest version %d, want 1", m.Version)
	}
	if arch, err := NormalizeArch(m.Config.Arch); err != nil || arch != m.Config.Arch {
		return fmt.Errorf("gondolin: manifest config.arch %q is not x86_64 or aarch64", m.Config.Arch)
	}
	if !buildIDPattern.MatchString(m.BuildID) {
		return fmt.Errorf("gondolin: manifest buildId %q is not a UUID Gondolin accepts", m.BuildID)
	}
	if want := BuildID(m.Checksums, m.Config.Arch); m.BuildID != want {
		return fmt.Errorf("gondolin: manifest buildId %s does not match its checksums (want %s)", m.BuildID, want)
	}
	for _, a := range []struct{ field, name, sum string }{
		{"kernel", m.Assets.Kernel, m.Checksums.Kernel},
		{"initramfs", m.Assets.Initramfs, m.Checksums.Initramfs},
		{"rootfs", m.Assets.Rootfs, m.Checksums.Rootfs},
		{"krunKernel", m.Assets.KrunKernel, m.Checksums.KrunKernel},
		{"krunInitrd", m.Assets.KrunInitrd, m.Checksums.KrunInitrd},
	} {
		required := a.field == "kernel" || a.field == "initramfs" || a.field == "rootfs"
		if a.name == "" && a.sum == "" && !required {
			continue
		}
		if a.name == "" || !filepath.IsLocal(a.name) {
			return fmt.Errorf("gondolin: manifest assets.%s %q is not a file name inside the directory", a.field, a.name)
		}
		if b, err := hex.DecodeString(a.sum); err != nil || len(b) != sha256.Size || strings.ToLower(a.sum) != a.sum {
			return fmt.Errorf("gondolin: manifest checksums.%s %q is not a sha256 hex digest", a.field, a.sum)
		}
	}
	return checkRuntimeDefaults(m.RuntimeDefaults)
}

// Marshal returns the manifest as Gondolin writes it: JSON with two-space
// indentation, here with a final newline.
func (m Manifest) Marshal() ([]byte, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("gondolin: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteManifest writes m to dir/manifest.json, atomically. It refuses a
// manifest Gondolin would reject or whose buildId does not match its
// checksums.
func WriteManifest(dir string, m Manifest) error {
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, ManifestFile), b, 0o644); err != nil {
		return fmt.Errorf("gondolin: %w", err)
	}
	return nil
}

// ReadManifest reads dir/manifest.json.
func ReadManifest(dir string) (Manifest, error) {
	p := filepath.Join(dir, ManifestFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return Manifest{}, fmt.Errorf("gondolin: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("gondolin: %s: %w", p, err)
	}
	return m, nil
}

// Verify checks the guest-asset directory dir as Gondolin would: the
// manifest is well formed, every asset it names hashes to its checksum,
// and the buildId matches.
func Verify(dir string) error {
	m, err := ReadManifest(dir)
	if err != nil {
		return err
	}
	if err := m.check(); err != nil {
		return fmt.Errorf("%w (in %s)", err, filepath.Join(dir, ManifestFile))
	}
	got, err := hashAssets(dir, m.Assets)
	if err != nil {
		return err
	}
	for _, a := range []struct{ name, want, got string }{
		{m.Assets.Kernel, m.Checksums.Kernel, got.Kernel},
		{m.Assets.Initramfs, m.Checksums.Initramfs, got.Initramfs},
		{m.Assets.Rootfs, m.Checksums.Rootfs, got.Rootfs},
		{m.Assets.KrunKernel, m.Checksums.KrunKernel, got.KrunKernel},
		{m.Assets.KrunInitrd, m.Checksums.KrunInitrd, got.KrunInitrd},
	} {
		if a.want != a.got {
			return fmt.Errorf("gondolin: %s: sha256 %s, manifest says %s", filepath.Join(dir, a.name), a.got, a.want)
		}
	}
	return nil
}
