package hostcheck

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/internal/machine/qemu"
	"github.com/sbx-dev/sbx/internal/machine/qemu/qemutest"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/lang"
)

// debianRelease is an os-release file of a Debian host, so that fixes
// are apt commands whatever the test runs on.
func debianRelease(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "os-release")
	if err := os.WriteFile(p, []byte("PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// baseEnv is an environment with private runtime and cache directories.
func baseEnv(t *testing.T, path string) []string {
	t.Helper()
	home := t.TempDir()
	return []string{
		"PATH=" + path,
		"HOME=" + home,
		"SBX_RUNTIME_DIR=" + filepath.Join(home, "run"),
		"SBX_CACHE_DIR=" + filepath.Join(home, "cache"),
	}
}

func find(t *testing.T, results []Result, name string) Result {
	t.Helper()
	for _, r := range results {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no %q check in %+v", name, results)
	return Result{}
}

// config returns a configuration of one image of the host's
// architecture whose artifacts have the given sources.
func config(t *testing.T, raws ...string) *lang.Config {
	t.Helper()
	img := &lang.Image{Name: "i", Platform: lang.Platform{OS: "linux", Architecture: runtime.GOARCH}}
	for _, raw := range raws {
		src, err := lang.ParseSource(raw, hcl.Range{})
		if err != nil {
			t.Fatal(err)
		}
		img.Artifacts = append(img.Artifacts, &lang.Artifact{Name: src.Ref, Source: src})
	}
	return &lang.Config{Dir: t.TempDir(), Images: map[string]*lang.Image{"i": img}}
}

func TestQEMUOnThisHost(t *testing.T) {
	qemutest.Require(t)
	res := Run(context.Background(), Options{Environ: baseEnv(t, os.Getenv("PATH")), OSRelease: debianRelease(t)})
	q := find(t, res, "qemu")
	if q.Status != OK || q.Fix != "" {
		t.Fatalf("qemu check on a host with QEMU: %+v", q)
	}
	for _, want := range []string{qemutest.Emulator, "virtio-net-pci", "-netdev stream"} {
		if !strings.Contains(q.Detail, want) {
			t.Errorf("qemu detail %q does not mention %q", q.Detail, want)
		}
	}
	a := find(t, res, "accel")
	if a.Status == Fail || a.Detail == "" || (a.Status == Warn) != (a.Fix != "") {
		t.Errorf("accel check with QEMU present: %+v", a)
	}
	// Debian's QEMU has the virtio-fs device.
	if m := find(t, res, "mounts"); runtime.GOOS == "linux" && runtime.GOARCH == "amd64" && (m.Status != OK || !strings.Contains(m.Detail, "virtio-fs")) {
		t.Errorf("mounts check on this host: %+v", m)
	}
}

func TestQEMUMissing(t *testing.T) {
	empty := t.TempDir()
	res := Run(context.Background(), Options{Environ: baseEnv(t, empty), OSRelease: debianRelease(t)})
	q := find(t, res, "qemu")
	if q.Status != Fail {
		t.Fatalf("qemu check with an empty PATH: %+v", q)
	}
	if !strings.Contains(q.Fix, "apt-get install qemu-system-x86") && runtime.GOARCH == "amd64" {
		t.Errorf("fix %q is not the apt install command", q.Fix)
	}
	if !strings.Contains(q.Detail, "not found") || !strings.Contains(q.Detail, empty) {
		t.Errorf("detail %q does not say where QEMU was looked for", q.Detail)
	}
	if Worst(res) != Fail {
		t.Errorf("Worst = %s, want fail", Worst(res))
	}
	if a := find(t, res, "accel"); a.Status != Fail {
		t.Errorf("accel without QEMU: %+v", a)
	}
}

func TestQEMUHelpParsing(t *testing.T) {
	help := `Storage devices:
name "virtio-blk-pci", bus PCI, alias "virtio-blk"
name "virtio-serial-pci", bus PCI, alias "virtio-serial"
name "virtserialport", bus virtio-serial-bus
name "virtio-rng-pci", bus PCI, alias "virtio-rng"
name "virtio-balloon-pci", bus PCI, alias "virtio-balloon"
`
	if got := missingDevices(help); len(got) != 1 || got[0] != "virtio-net-pci" {
		t.Errorf("missingDevices = %q, want [virtio-net-pci]", got)
	}
	netdevs := "Available netdev backend types:\nsocket\nstream\nuser\n"
	if !hasNetdev(netdevs, "stream") || hasNetdev(netdevs, "dgram") || hasNetdev("Available netdev backend types:\nsocket\n", "stream") {
		t.Error("hasNetdev misreads -netdev help")
	}
}

func TestDetect(t *testing.T) {
	if runtime.GOOS == "darwin" {
		t.Skip("Detect is Homebrew on macOS")
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		release string
		want    PackageManager
	}{
		{"ID=debian\n", Apt},
		{"ID=linuxmint\nID_LIKE=\"ubuntu debian\"\n", Apt},
		{"ID=fedora\n", DNF},
		{"ID=rocky\nID_LIKE=\"rhel centos fedora\"\n", DNF},
		{"ID=arch\n", Unknown},
	} {
		if got := Detect(write("os-release", tc.release), dir); got != tc.want {
			t.Errorf("Detect(%q) = %q, want %q", tc.release, got, tc.want)
		}
	}
	// Without an os-release file, the package manager on PATH decides.
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "dnf"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := Detect(filepath.Join(dir, "missing"), bin); got != DNF {
		t.Errorf("Detect with dnf on PATH = %q, want dnf", got)
	}
}

func TestRuntimeDir(t *testing.T) {
	env := baseEnv(t, "")
	base := filepath.Join(t.TempDir(), "run")
	env = append(env, "SBX_RUNTIME_DIR="+base)
	opts := &Options{Environ: env}

	if r := checkRuntimeDir(opts); r.Status != OK || !strings.Contains(r.Detail, "does not exist yet") {
		t.Errorf("missing runtime dir: %+v", r)
	}
	if err := os.Mkdir(base, 0o700); err != nil {
		t.Fatal(err)
	}
	if r := checkRuntimeDir(opts); r.Status != OK || r.Fix != "" {
		t.Errorf("private runtime dir: %+v", r)
	}

	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	r := checkRuntimeDir(opts)
	if r.Status != Warn || !strings.Contains(r.Detail, "0755") || r.Fix != "chmod 700 "+base {
		t.Errorf("runtime dir of mode 0755: %+v", r)
	}
	if fi, err := os.Stat(base); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the check changed the directory's mode: %v %v", fi.Mode(), err)
	}

	link := base + "-link"
	if err := os.Symlink(base, link); err != nil {
		t.Fatal(err)
	}
	opts.Environ = append(env, "SBX_RUNTIME_DIR="+link)
	if r := checkRuntimeDir(opts); r.Status != Fail || !strings.Contains(r.Detail, "symbolic link") {
		t.Errorf("runtime dir that is a symbolic link: %+v", r)
	}

	long := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	opts.Environ = append(env, "SBX_RUNTIME_DIR="+long)
	if r := checkRuntimeDir(opts); r.Status != Fail || !strings.Contains(r.Detail, "too long") || !strings.Contains(r.Fix, "SBX_RUNTIME_DIR=") {
		t.Errorf("runtime dir too long for sockets: %+v", r)
	}

	if os.Geteuid() == 0 {
		other := filepath.Join(t.TempDir(), "other")
		if err := os.Mkdir(other, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(other, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		opts.Environ = append(env, "SBX_RUNTIME_DIR="+other)
		if r := checkRuntimeDir(opts); r.Status != Fail || !strings.Contains(r.Detail, "uid 4242") {
			t.Errorf("runtime dir of another user: %+v", r)
		}
	}
}

func TestCacheDir(t *testing.T) {
	root := filepath.Join(t.TempDir(), "cache")
	opts := &Options{Environ: []string{"SBX_CACHE_DIR=" + root}, MinFree: 1}
	if r := checkCacheDir(opts); r.Status != OK || !strings.Contains(r.Detail, "does not exist yet") {
		t.Errorf("missing cache dir: %+v", r)
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if r := checkCacheDir(opts); r.Status != OK || !strings.Contains(r.Detail, "free") {
		t.Errorf("cache dir: %+v", r)
	}
	opts.MinFree = 1 << 62
	if r := checkCacheDir(opts); r.Status != Warn || !strings.Contains(r.Detail, "free on its file system") || !strings.Contains(r.Fix, "SBX_CACHE_DIR") {
		t.Errorf("cache dir with less free space than asked: %+v", r)
	}
	opts.MinFree = 1
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	if r := checkCacheDir(opts); r.Status != Warn || r.Fix != "chmod go-w "+root {
		t.Errorf("cache dir others may write: %+v", r)
	}
}

func TestApt(t *testing.T) {
	for _, tool := range []string{"apt-get", "apt-cache"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH; the deb: checks need a Debian host (install apt, as .ci/run's host has it)", tool)
		}
	}
	policy, err := exec.Command("apt-cache", "policy", "busybox-static").Output()
	if err != nil {
		t.Fatal(err)
	}
	candidate := parsePolicy(string(policy))["busybox-static"].candidate
	if candidate == "" {
		t.Fatalf("apt has no busybox-static; run apt-get update (apt-cache policy said %q)", policy)
	}
	env := baseEnv(t, os.Getenv("PATH"))
	pm := Apt
	run := func(srcs ...string) Result {
		return checkApt(context.Background(), &Options{Environ: env, Config: config(t, srcs...)}, pm)
	}
	if r := run("deb:busybox-static", "deb:busybox-static="+candidate); r.Status != OK {
		t.Errorf("a package apt offers: %+v", r)
	}
	r := run("deb:no-such-package-sbx-doctor")
	if r.Status != Fail || !strings.Contains(r.Detail, "no package no-such-package-sbx-doctor") || !strings.Contains(r.Fix, "apt-get update") {
		t.Errorf("a package apt does not know: %+v", r)
	}
	r = run("deb:busybox-static=1:0.0-sbx-doctor")
	if r.Status != Fail || !strings.Contains(r.Detail, "not 1:0.0-sbx-doctor") {
		t.Errorf("a version apt does not offer: %+v", r)
	}

	// A package set from the host's apt sources counts, and is checked,
	// with the deb: sources: five packages and a kernel are six.
	cfg := config(t, "deb:busybox-static")
	cfg.Images["i"].Packages.Requests = []string{"bash", "coreutils", "git", "ca-certificates", "busybox-static"}
	r = checkApt(context.Background(), &Options{Environ: env, Config: cfg}, pm)
	if r.Status != OK || !strings.Contains(r.Detail, "apt offers the 5 packages") {
		t.Errorf("a package set and a deb: source: %+v", r)
	}
	cfg.Images["i"].Packages.Requests = append(cfg.Images["i"].Packages.Requests, "no-such-package-sbx-doctor")
	r = checkApt(context.Background(), &Options{Environ: env, Config: cfg}, pm)
	if r.Status != Fail || !strings.Contains(r.Detail, "no package no-such-package-sbx-doctor") {
		t.Errorf("a package set naming a package apt does not know: %+v", r)
	}
	cfg = config(t)
	cfg.Images["i"].Packages.Requests = []string{"bash"}
	if res := Run(context.Background(), Options{Environ: env, Config: cfg}); !strings.Contains(find(t, res, "apt").Detail, "apt offers the 1 package") {
		t.Errorf("a package set alone is not checked with apt: %+v", res)
	}

	env = baseEnv(t, t.TempDir())
	if r := run("deb:busybox-static"); r.Status != Fail || !strings.Contains(r.Detail, "apt-get and apt-cache") {
		t.Errorf("apt missing from PATH: %+v", r)
	}
}

func TestParsePolicy(t *testing.T) {
	out := `busybox-static:
  Installed: (none)
  Candidate: 1:1.35.0-4+b3
  Version table:
     1:1.36.1-9 100
        100 /var/lib/dpkg/status
 *** 1:1.35.0-4+b3 500
        500 http://mirror.invalid/debian bookworm/main amd64 Packages
gone:
  Installed: (none)
  Candidate: (none)
  Version table:
`
	p := parsePolicy(out)
	if got := p["busybox-static"]; got.candidate != "1:1.35.0-4+b3" || strings.Join(got.versions, " ") != "1:1.36.1-9 1:1.35.0-4+b3" {
		t.Errorf("busybox-static: %+v", got)
	}
	if got, ok := p["gone"]; !ok || got.candidate != "" || len(got.versions) != 0 {
		t.Errorf("gone: %+v %v", got, ok)
	}
	files := "Package files:\n 100 /var/lib/dpkg/status\n     release a=now\n 500 http://mirror.invalid/debian bookworm/main amd64 Packages\n"
	if n := aptSources(files); n != 1 {
		t.Errorf("aptSources = %d, want 1", n)
	}
	if n := aptSources("Package files:\n 100 /var/lib/dpkg/status\n     release a=now\n"); n != 0 {
		t.Errorf("aptSources without indexes = %d, want 0", n)
	}
}

func TestNPM(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal("npm is not on PATH; the npm: checks need it (apt-get install npm)")
	}
	env := baseEnv(t, filepath.Dir(npm)+string(os.PathListSeparator)+os.Getenv("PATH"))
	env = append(env, "NPM_CONFIG_REGISTRY=https://127.0.0.1:9/npm/", "NPM_CONFIG_USERCONFIG="+filepath.Join(t.TempDir(), "npmrc"))
	opts := &Options{Environ: env, Config: config(t, "npm:left-pad@1.3.0")}
	r := checkNPM(context.Background(), opts, Apt)
	if r.Status != OK || !strings.Contains(r.Detail, "127.0.0.1:9/npm/") {
		t.Errorf("npm with a registry: %+v", r)
	}

	opts.Environ = baseEnv(t, t.TempDir())
	if r := checkNPM(context.Background(), opts, Apt); r.Status != Warn || !strings.Contains(r.Fix, "apt-get install npm") {
		t.Errorf("npm missing: %+v", r)
	}
}

func TestOCICredentialHelperMissing(t *testing.T) {
	home := t.TempDir()
	docker := filepath.Join(home, ".docker")
	if err := os.MkdirAll(docker, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("DOCKER_CONFIG", docker)
	cfg := config(t)
	src, err := lang.ParseSource("registry.invalid/team/base:1", hcl.Range{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Images["i"].Base = src
	opts := &Options{Environ: baseEnv(t, t.TempDir()), Config: cfg}

	if r := checkOCI(context.Background(), opts); r.Status != OK || !strings.Contains(r.Detail, "anonymous pulls from registry.invalid") {
		t.Errorf("no docker config: %+v", r)
	}
	conf := `{"credHelpers": {"registry.invalid": "sbx-doctor-missing"}}`
	if err := os.WriteFile(filepath.Join(docker, "config.json"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := checkOCI(context.Background(), opts); r.Status != Fail || !strings.Contains(r.Detail, "registry.invalid") || r.Fix == "" {
		t.Errorf("a credential helper that is not installed: %+v", r)
	}
}

func TestWorst(t *testing.T) {
	if w := Worst(nil); w != OK {
		t.Errorf("Worst(nil) = %s", w)
	}
	if w := Worst([]Result{{Status: OK}, {Status: Warn}, {Status: OK}}); w != Warn {
		t.Errorf("Worst = %s, want warn", w)
	}
	if w := Worst([]Result{{Status: Fail}, {Status: Warn}}); w != Fail {
		t.Errorf("Worst = %s, want fail", w)
	}
}

func TestAccelWhy(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the KVM device is Linux's")
	}
	tcg := qemu.Host{Arch: runtime.GOARCH, QEMU: map[string]qemu.Binary{runtime.GOARCH: {Path: "/q"}}, Accels: []qemu.Accel{qemu.AccelTCG}}
	dir := t.TempDir()

	r := checkAccel(tcg, nil, filepath.Join(dir, "kvm"))
	if r.Status != Warn || !strings.Contains(r.Detail, "does not exist") || !strings.Contains(r.Fix, "modprobe kvm_") {
		t.Errorf("no KVM device: %+v", r)
	}

	// A device this user cannot open (root opens anything): one its
	// group may use, and one no group may.
	if os.Geteuid() != 0 {
		dev := filepath.Join(dir, "kvm-group")
		if err := os.WriteFile(dev, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dev, 0o060); err != nil { // past the umask
			t.Fatal(err)
		}
		r = checkAccel(tcg, nil, dev)
		if r.Status != Warn || !strings.Contains(r.Detail, "does not open read-write") || !strings.HasPrefix(r.Fix, "sudo usermod -aG ") {
			t.Errorf("KVM device without permission: %+v", r)
		}
		closed := filepath.Join(dir, "kvm-closed")
		if err := os.WriteFile(closed, nil, 0o000); err != nil {
			t.Fatal(err)
		}
		r = checkAccel(tcg, nil, closed)
		if r.Status != Warn || !strings.Contains(r.Fix, "chmod 660 "+closed) || !strings.Contains(r.Fix, "usermod -aG kvm $USER") {
			t.Errorf("KVM device no group may use: %+v", r)
		}
	}

	// A device that opens, but the probe's guest did not run.
	dev := filepath.Join(dir, "kvm-open")
	if err := os.WriteFile(dev, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	hung := tcg
	hung.Note = "KVM present but unusable: a test guest made no progress to its end in 3s under KVM (it reached 64-bit mode and stalled there); using TCG"
	r = checkAccel(hung, nil, dev)
	if r.Status != Warn || !strings.Contains(r.Detail, "made no progress") || !strings.Contains(r.Detail, "TCG, which works but") || strings.Contains(r.Detail, "; using TCG") {
		t.Errorf("KVM that hangs guests: %+v", r)
	}

	kvm := tcg
	kvm.Accels = []qemu.Accel{qemu.AccelKVM, qemu.AccelTCG}
	if r := checkAccel(kvm, nil, dev); r.Status != OK || r.Fix != "" {
		t.Errorf("working KVM: %+v", r)
	}
}

// TestMountsCheck: over virtio-fs where the emulator has the device on a
// Linux amd64 host; 9P with a warning and a fix when only the device is
// missing; 9P without one where virtio-fs cannot run at all.
func TestMountsCheck(t *testing.T) {
	if envMountTransport != sandboxfs.EnvTransport {
		t.Fatalf("the fix names %s, the sandbox reads %s", envMountTransport, sandboxfs.EnvTransport)
	}
	with := qemu.Binary{Path: "/usr/bin/qemu-system-x86_64", VhostUserFS: true}
	without := with
	without.VhostUserFS = false
	for _, c := range []struct {
		name   string
		host   qemu.Host
		status Status
		detail string
	}{
		{"linux with the device", qemu.Host{OS: "linux", Arch: "amd64", QEMU: map[string]qemu.Binary{"amd64": with}}, OK, "virtio-fs"},
		{"linux without it", qemu.Host{OS: "linux", Arch: "amd64", QEMU: map[string]qemu.Binary{"amd64": without}}, Warn, "9P"},
		{"macOS", qemu.Host{OS: "darwin", Arch: "arm64", QEMU: map[string]qemu.Binary{"arm64": with}}, OK, "9P"},
		{"linux arm64", qemu.Host{OS: "linux", Arch: "arm64", QEMU: map[string]qemu.Binary{"arm64": with}}, OK, "amd64 machines only"},
		{"no emulator", qemu.Host{OS: "linux", Arch: "amd64", QEMU: map[string]qemu.Binary{}}, Fail, "not probed"},
	} {
		r := checkMounts(c.host, nil)
		if r.Status != c.status || !strings.Contains(r.Detail, c.detail) || (r.Status == OK) != (r.Fix == "") {
			t.Errorf("%s: %+v; want %s with %q", c.name, r, c.status, c.detail)
		}
	}
}

func TestQemuImgForProvisionedImages(t *testing.T) {
	cfg := config(t)
	if res := Run(context.Background(), Options{Environ: baseEnv(t, t.TempDir()), Config: cfg}); slices.ContainsFunc(res, func(r Result) bool { return r.Name == "qemu-img" }) {
		t.Errorf("qemu-img checked for a configuration without provision steps: %+v", res)
	}
	cfg.Images["i"].Provision = []*lang.Provision{{Name: "tools"}}

	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "qemu-img"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := checkQemuImg(&Options{Environ: baseEnv(t, bin), Config: cfg}, Apt)
	if r.Status != OK || !strings.Contains(r.Detail, filepath.Join(bin, "qemu-img")) {
		t.Errorf("qemu-img in PATH: %+v", r)
	}
	res := Run(context.Background(), Options{Environ: baseEnv(t, t.TempDir()), Config: cfg, OSRelease: debianRelease(t)})
	if r := find(t, res, "qemu-img"); r.Status != Fail || !strings.Contains(r.Fix, "apt-get install qemu-utils") {
		t.Errorf("qemu-img missing: %+v", r)
	}
}
