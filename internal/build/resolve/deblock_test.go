package resolve

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/apt/apttest"
	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/archive/archivetest"
	"github.com/sbx-dev/sbx/internal/build/digest"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const (
	metaPkg  = "linux-image-amd64"
	imagePkg = "linux-image-6.1.0-57-amd64"
	kernVer  = "6.1.192-3"
)

// kernelApt is a fake apt with Debian's kernel packaging: the meta package
// linux-image-amd64 depends on the versioned image package at its exact
// version; busybox-static and ca-certificates have candidates.
func kernelApt(t *testing.T) (*fakeApt, []byte) {
	t.Helper()
	meta := archivetest.Deb(t, "Package: "+metaPkg+"\nVersion: "+kernVer+"\nArchitecture: amd64\nDepends: "+imagePkg+" (= "+kernVer+")\n", archive.Xz,
		archivetest.Entry{Name: "./usr/share/doc/" + metaPkg, Type: '2', Linkname: imagePkg})
	image := archivetest.Deb(t, "Package: "+imagePkg+"\nVersion: "+kernVer+"\nArchitecture: amd64\nDepends: kmod, linux-base (>= 4.3~), initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool\n", archive.Xz,
		archivetest.Entry{Name: "./boot/vmlinuz-6.1.0-57-amd64", Body: "kernel"})
	apt := &fakeApt{
		content:  []byte("!<arch>\nother package"),
		fileArch: "amd64",
		debs: map[string][]byte{
			metaPkg + "=" + kernVer:  meta,
			imagePkg + "=" + kernVer: image,
		},
		policy: map[string]fakePolicy{
			metaPkg:           {candidate: kernVer, available: []string{kernVer, "6.1.176-1"}},
			imagePkg:          {candidate: kernVer, available: []string{kernVer}},
			"busybox-static":  {candidate: "1:1.35.0-4+deb12u1+b1", available: []string{"1:1.35.0-4+deb12u1+b1"}},
			"ca-certificates": {candidate: "20250419~deb12u2", available: []string{"20250419~deb12u2", "20230311+deb12u1"}},
		},
	}
	return apt, image
}

func amd64Host(t *testing.T) {
	t.Helper()
	if hostDebArch(t) != "amd64" {
		t.Skip("SKIPPED: the fake kernel packages are amd64's; this host asks apt with an architecture qualifier")
	}
}

// TestDebKernelFollowsMeta pins a kernel named by its meta package: the
// meta package's control file leads to the versioned image package, which
// is pinned. The same source as an artifact pins the meta package itself.
func TestDebKernelFollowsMeta(t *testing.T) {
	amd64Host(t)
	apt, image := kernelApt(t)
	s := New(Options{Apt: apt})
	ctx := context.Background()

	pin, err := s.ResolveKernel(ctx, parseDeb(t, "deb:"+metaPkg), linuxAMD64)
	if err != nil {
		t.Fatal(err)
	}
	want := lockfiles.Pin{Source: "deb:" + metaPkg, Kind: "deb", Version: kernVer, SHA256: sha256Hex(image), Filename: imagePkg + "_" + kernVer + "_amd64.deb"}
	if *pin != want {
		t.Errorf("pin = %+v\nwant  %+v", *pin, want)
	}
	wantCalls := "policy " + metaPkg + " " + metaPkg + "=" + kernVer + " " + imagePkg + "=" + kernVer
	if got := strings.Join(apt.calls, " "); got != wantCalls {
		t.Errorf("apt calls = %s\nwant        %s", got, wantCalls)
	}

	// Named directly, the image package is downloaded once.
	apt.calls = nil
	pin, err = s.ResolveKernel(ctx, parseDeb(t, "deb:"+imagePkg), linuxAMD64)
	if err != nil || pin.Filename != want.Filename || pin.SHA256 != want.SHA256 {
		t.Errorf("image package: %+v, %v", pin, err)
	}
	if got := strings.Join(apt.calls, " "); got != "policy "+imagePkg+" "+imagePkg+"="+kernVer {
		t.Errorf("apt calls = %s", got)
	}

	// As an artifact, the meta package is what was asked for.
	pin, err = s.Resolve(ctx, parseDeb(t, "deb:"+metaPkg), linuxAMD64)
	if err != nil || pin.Filename != metaPkg+"_"+kernVer+"_amd64.deb" {
		t.Errorf("artifact: %+v, %v", pin, err)
	}

	// A meta package that names no exact version leads to the image
	// package's candidate.
	apt.debs[metaPkg+"=6.1.176-1"] = archivetest.Deb(t, "Package: "+metaPkg+"\nVersion: 6.1.176-1\nDepends: "+imagePkg+"\n", archive.Gzip)
	apt.calls = nil
	pin, err = s.ResolveKernel(ctx, parseDeb(t, "deb:"+metaPkg+"<<6.1.190"), linuxAMD64)
	if err != nil || pin.Filename != want.Filename {
		t.Errorf("unversioned dependency: %+v, %v", pin, err)
	}
	if got := strings.Join(apt.calls, " "); got != "policy "+metaPkg+" "+metaPkg+"=6.1.176-1 policy "+imagePkg+" "+imagePkg+"="+kernVer {
		t.Errorf("apt calls = %s", got)
	}

	// A chain of packages that each depend on another kernel package ends.
	apt.debs["linux-image-loop=1"] = archivetest.Deb(t, "Package: linux-image-loop\nVersion: 1\nDepends: linux-image-9-a (= 1)\n", archive.Gzip)
	apt.debs["linux-image-9-a=1"] = archivetest.Deb(t, "Package: linux-image-9-a\nVersion: 1\nDepends: linux-image-9-b (= 1)\n", archive.Gzip)
	_, err = s.ResolveKernel(ctx, parseDeb(t, "deb:linux-image-loop=1"), linuxAMD64)
	if err == nil || !strings.Contains(err.Error(), "following the kernel meta package linux-image-loop led to linux-image-9-a 1, which depends on the kernel package linux-image-9-b in turn") {
		t.Errorf("chain: err = %v", err)
	}
}

func debConfig(dir, kernel string, artifacts ...string) *lang.Config {
	img := &lang.Image{Name: "quickstart", Platform: linuxAMD64, DeclRange: rng(1)}
	if kernel != "" {
		src, _ := lang.ParseSource(kernel, rng(3))
		img.Kernel = &lang.Kernel{Source: src}
	}
	for i, a := range artifacts {
		src, _ := lang.ParseSource(a, rng(10+i))
		name := strings.ReplaceAll(src.Ref, "-", "_")
		img.Artifacts = append(img.Artifacts, &lang.Artifact{Name: name, Source: src, Dest: "/"})
	}
	return &lang.Config{Dir: dir, Images: map[string]*lang.Image{"quickstart": img}}
}

func debLock(t *testing.T, s *Set, cfg *lang.Config, old *lockfiles.Lock, upgrade bool) (*lockfiles.Lock, []LockChange) {
	t.Helper()
	l, changes, diags := s.Lock(context.Background(), cfg, old, upgrade)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return l, changes
}

// TestLockDebGolden locks a kernel meta package and two packages without
// an exact version, and compares the lock file with
// testdata/deb.lock.hcl (go test -update rewrites it); the file reads
// back to the same lock.
func TestLockDebGolden(t *testing.T) {
	amd64Host(t)
	apt, _ := kernelApt(t)
	s := New(Options{Apt: apt, InputHash: testInputHash})
	cfg := debConfig(t.TempDir(), "deb:"+metaPkg, "deb:busybox-static", "deb:ca-certificates>=20230311,<<20260000")
	l, _ := debLock(t, s, cfg, nil, false)
	got := lockfiles.Marshal(l)
	golden := filepath.Join("testdata", "deb.lock.hcl")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("lock file differs from %s (go test -update rewrites it):\n%s", golden, got)
	}
	back, diags := lockfiles.Parse(got, golden)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if !back.Equal(l) {
		t.Errorf("the lock file reads back to another lock:\n%+v\n%+v", back.Images["quickstart"], l.Images["quickstart"])
	}
}

// TestLockDebKeepsSatisfiedPins checks that a deb pin stays while the
// spec still allows it, as Terraform keeps a provider version: apt's
// candidate moving on changes nothing, a changed source that the pinned
// version satisfies keeps the pin (with the new source), one it does not
// satisfy is resolved again, and -upgrade moves to the candidate.
func TestLockDebKeepsSatisfiedPins(t *testing.T) {
	amd64Host(t)
	apt, _ := kernelApt(t)
	s := New(Options{Apt: apt, InputHash: testInputHash})
	dir := t.TempDir()
	first, _ := debLock(t, s, debConfig(dir, "deb:"+metaPkg, "deb:busybox-static"), nil, false)
	busybox := first.Images["quickstart"].Inputs["artifact.busybox_static"]
	if busybox == nil || busybox.Version != "1:1.35.0-4+deb12u1+b1" {
		t.Fatalf("busybox pin = %+v", busybox)
	}

	// A point release: apt now has a newer candidate.
	apt.policy["busybox-static"] = fakePolicy{candidate: "1:1.35.0-4+deb12u2", available: []string{"1:1.35.0-4+deb12u2"}}
	apt.calls = nil
	second, changes := debLock(t, s, debConfig(dir, "deb:"+metaPkg, "deb:busybox-static"), first, false)
	if len(apt.calls) != 0 || len(changes) != 0 || !second.Equal(first) {
		t.Errorf("unchanged spec: apt calls %q, changes %v", apt.calls, changeKeys(changes))
	}

	// The spec now names a relation the pin satisfies: kept, no apt.
	third, changes := debLock(t, s, debConfig(dir, "deb:"+metaPkg, "deb:busybox-static>=1:1.35"), second, false)
	p := third.Images["quickstart"].Inputs["artifact.busybox_static"]
	if len(apt.calls) != 0 || p.Version != busybox.Version || p.Source != "deb:busybox-static>=1:1.35" || p.SHA256 != busybox.SHA256 {
		t.Errorf("satisfied relation: apt calls %q, pin %+v", apt.calls, p)
	}
	if got := strings.Join(changeKeys(changes), " "); got != "~quickstart.artifact.busybox_static" || changes[0].Old.Source != "deb:busybox-static" {
		t.Errorf("changes = %s", got)
	}

	// One it does not satisfy: resolved again.
	fourth, _ := debLock(t, s, debConfig(dir, "deb:"+metaPkg, "deb:busybox-static>>1:1.35.0-4+deb12u1+b1"), third, false)
	if p := fourth.Images["quickstart"].Inputs["artifact.busybox_static"]; p.Version != "1:1.35.0-4+deb12u2" {
		t.Errorf("unsatisfied relation: pin %+v", p)
	}

	// upgrade moves a source without a version to the candidate.
	apt.calls = nil
	fifth, changes := debLock(t, s, debConfig(dir, "deb:"+metaPkg, "deb:busybox-static"), second, true)
	if p := fifth.Images["quickstart"].Inputs["artifact.busybox_static"]; p.Version != "1:1.35.0-4+deb12u2" {
		t.Errorf("upgrade: pin %+v", p)
	}
	if got := strings.Join(changeKeys(changes), " "); got != "~quickstart.artifact.busybox_static" {
		t.Errorf("upgrade changes = %s", got)
	}

	// The followed kernel pin is kept for its own source only: another
	// source for the meta package is resolved again, since the pin's
	// version is the image package's.
	apt.calls = nil
	sixth, _ := debLock(t, s, debConfig(dir, "deb:"+metaPkg+">=6.1", "deb:busybox-static"), second, false)
	if k := sixth.Images["quickstart"].Inputs["kernel"]; k.Filename != imagePkg+"_"+kernVer+"_amd64.deb" || k.Source != "deb:"+metaPkg+">=6.1" {
		t.Errorf("kernel pin = %+v", k)
	}
	if len(apt.calls) == 0 || !strings.HasPrefix(apt.calls[0], "policy "+metaPkg) {
		t.Errorf("apt calls = %q, want the meta package resolved again", apt.calls)
	}
}

// aptCandidate asks apt-cache policy, as a person would, for the
// candidate of pkg; the test is skipped when apt has none.
func aptCandidate(t *testing.T, pkg string) string {
	t.Helper()
	archivetest.RequireApt(t)
	out, err := exec.Command("apt-cache", "policy", pkg).Output()
	m := regexp.MustCompile(`Candidate: (\S+)`).FindSubmatch(out)
	if err != nil || m == nil || string(m[1]) == "(none)" {
		t.Skipf("SKIPPED: apt has no candidate for %s (run apt-get update?): %v", pkg, err)
	}
	return string(m[1])
}

// TestLockDebWithAptGet locks deb:busybox-static, which names no
// version, through this machine's apt: the pin is the candidate
// apt-cache policy shows.
func TestLockDebWithAptGet(t *testing.T) {
	candidate := aptCandidate(t, "busybox-static")
	host := hostDebArch(t)
	s := New(Options{InputHash: testInputHash})
	cfg := debConfig(t.TempDir(), "", "deb:busybox-static")
	cfg.Images["quickstart"].Platform = lang.Platform{OS: "linux", Architecture: runtime.GOARCH}
	l, _ := debLock(t, s, cfg, nil, false)
	p := l.Images["quickstart"].Inputs["artifact.busybox_static"]
	want := "busybox-static_" + strings.ReplaceAll(candidate, ":", "%3a") + "_" + host + ".deb"
	if p == nil || p.Version != candidate || p.Filename != want || len(p.SHA256) != 64 {
		t.Errorf("pin = %+v, want version %s in %s", p, candidate, want)
	}
}

// TestLockKernelMetaWithAptGet locks a kernel named deb:linux-image-amd64
// through this machine's apt: it is followed to the versioned
// linux-image-ABI-amd64 package the meta package's candidate depends on,
// as apt-cache show lists it.
func TestLockKernelMetaWithAptGet(t *testing.T) {
	if hostDebArch(t) != "amd64" {
		t.Skip("SKIPPED: linux-image-amd64 is amd64's kernel; this host is not amd64")
	}
	candidate := aptCandidate(t, metaPkg)
	out, err := exec.Command("apt-cache", "show", metaPkg+"="+candidate).Output()
	if err != nil {
		t.Fatalf("apt-cache show %s=%s: %v", metaPkg, candidate, err)
	}
	m := regexp.MustCompile(`(?m)^Depends:.*\b(linux-image-[0-9]\S*-amd64) \(= (\S+)\)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("apt-cache show %s=%s names no versioned image package:\n%s", metaPkg, candidate, out)
	}
	wantFile := string(m[1]) + "_" + strings.ReplaceAll(string(m[2]), ":", "%3a") + "_amd64.deb"

	// The test package cache runs apt-get download once per package and
	// version, so that the kernel is not fetched on every run.
	s := New(Options{Apt: apttest.Cache{}, InputHash: testInputHash})
	l, _ := debLock(t, s, debConfig(t.TempDir(), "deb:"+metaPkg), nil, false)
	k := l.Images["quickstart"].Inputs["kernel"]
	if k == nil || k.Filename != wantFile || k.Version != string(m[2]) || k.Source != "deb:"+metaPkg {
		t.Fatalf("kernel pin = %+v, want %s", k, wantFile)
	}
	if got, _, err := digest.File(context.Background(), archivetest.AptDownload(t, string(m[1]), string(m[2]))); err != nil || got != k.SHA256 {
		t.Errorf("the pinned sha256 is not the package's: %s, %v; want %s", got, err, k.SHA256)
	}
}
