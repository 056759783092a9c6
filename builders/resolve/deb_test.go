package resolve

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/lang"
)

// fakeApt writes a .deb named as apt-get names it. It is the seam for the
// machine's apt sources, which a test cannot control.
type fakeApt struct {
	content  []byte
	fileVer  string // version written into the file name; "" means as asked
	calls    []string
	lastDir  string
	fileArch string
}

func (a *fakeApt) Download(_ context.Context, name, version, dir string) (string, error) {
	a.calls = append(a.calls, name+"="+version)
	a.lastDir = dir
	pkg, arch, ok := strings.Cut(name, ":")
	if !ok {
		arch = a.fileArch
	}
	v := version
	if a.fileVer != "" {
		v = a.fileVer
	}
	path := filepath.Join(dir, pkg+"_"+strings.ReplaceAll(v, ":", "%3a")+"_"+arch+".deb")
	return path, os.WriteFile(path, a.content, 0o644)
}

func debSource(name, version string) *lang.Source {
	return &lang.Source{Kind: lang.SourceDeb, Raw: "deb:" + name + "=" + version, Ref: name, Version: version}
}

func hostDebArch(t *testing.T) string {
	a, err := debArch(lang.Platform{OS: "linux", Architecture: runtime.GOARCH})
	if err != nil {
		t.Skipf("no Debian architecture for this host (%s): %v", runtime.GOARCH, err)
	}
	return a
}

func TestDebWithFakeApt(t *testing.T) {
	host := hostDebArch(t)
	apt := &fakeApt{content: []byte("!<arch>\ndebian-binary fake"), fileArch: host}
	s := New(Options{Apt: apt})
	hostPlatform := lang.Platform{OS: "linux", Architecture: runtime.GOARCH}
	pin, err := s.Resolve(context.Background(), debSource("busybox-static", "1:1.36.1-9"), hostPlatform)
	if err != nil {
		t.Fatal(err)
	}
	wantFile := "busybox-static_1%3a1.36.1-9_" + host + ".deb"
	if pin.Version != "1:1.36.1-9" || pin.Filename != wantFile || pin.SHA256 != sha256Hex(apt.content) || pin.Kind != "deb" {
		t.Errorf("pin = %+v", pin)
	}
	if len(apt.calls) != 1 || apt.calls[0] != "busybox-static=1:1.36.1-9" {
		t.Errorf("apt calls = %q, want the native name without qualifier", apt.calls)
	}
	if _, err := os.Stat(apt.lastDir); !os.IsNotExist(err) {
		t.Errorf("download directory %s was left behind", apt.lastDir)
	}

	// Another architecture is asked for with a qualifier.
	foreign := lang.Platform{OS: "linux", Architecture: "arm64"}
	if host == "arm64" {
		foreign = lang.Platform{OS: "linux", Architecture: "amd64"}
	}
	fa, _ := debArch(foreign)
	pin, err = s.Resolve(context.Background(), debSource("linux-image-cloud", "6.1.0-1"), foreign)
	if err != nil {
		t.Fatal(err)
	}
	if got := apt.calls[len(apt.calls)-1]; got != "linux-image-cloud:"+fa+"=6.1.0-1" || !strings.HasSuffix(pin.Filename, "_"+fa+".deb") {
		t.Errorf("call %q, file %s: want an %s qualifier", got, pin.Filename, fa)
	}

	// A downloader that hands back another version is caught.
	apt.fileVer = "1:1.35.0-1"
	_, err = s.Resolve(context.Background(), debSource("busybox-static", "1:1.36.1-9"), hostPlatform)
	if err == nil || !strings.Contains(err.Error(), "want busybox-static 1:1.36.1-9") {
		t.Errorf("err = %v, want a version mismatch", err)
	}
	if _, err := s.Resolve(context.Background(), debSource("busybox-static", ""), hostPlatform); err == nil {
		t.Errorf("a source without a version resolved")
	}
}

func TestDebArch(t *testing.T) {
	for p, want := range map[lang.Platform]string{
		{OS: "linux", Architecture: "amd64"}:                "amd64",
		{OS: "linux", Architecture: "arm64", Variant: "v8"}: "arm64",
		{OS: "linux", Architecture: "arm", Variant: "v7"}:   "armhf",
		{OS: "linux", Architecture: "arm", Variant: "v6"}:   "armel",
		{OS: "linux", Architecture: "386"}:                  "i386",
		{OS: "linux", Architecture: "ppc64le"}:              "ppc64el",
	} {
		if got, err := debArch(p); got != want || err != nil {
			t.Errorf("%s: %q, %v; want %q", p, got, err, want)
		}
	}
	if _, err := debArch(lang.Platform{OS: "darwin", Architecture: "arm64"}); err == nil {
		t.Error("darwin mapped to a Debian architecture")
	}
}

// TestDebWithAptGet resolves a real package through this machine's apt
// sources. It needs apt-get and a candidate for busybox-static.
func TestDebWithAptGet(t *testing.T) {
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Skip("SKIPPED: apt-get is not installed; the real AptGet downloader is untested on this machine")
	}
	out, err := exec.Command("apt-cache", "policy", "busybox-static").Output()
	m := regexp.MustCompile(`Candidate: (\S+)`).FindSubmatch(out)
	if err != nil || m == nil || string(m[1]) == "(none)" {
		t.Skip("SKIPPED: apt has no candidate for busybox-static (run apt-get update?); the real AptGet downloader is untested on this machine")
	}
	version := string(m[1])
	host := hostDebArch(t)

	s := New(Options{})
	pin, err := s.Resolve(context.Background(), debSource("busybox-static", version), lang.Platform{OS: "linux", Architecture: runtime.GOARCH})
	if err != nil {
		t.Fatal(err)
	}
	if pin.Version != version || !strings.HasPrefix(pin.Filename, "busybox-static_") || !strings.HasSuffix(pin.Filename, "_"+host+".deb") {
		t.Errorf("pin = %+v", pin)
	}

	// The pinned hash is the .deb's: download it again and compare.
	dir := t.TempDir()
	path, err := (&AptGet{}).Download(context.Background(), "busybox-static", version, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := hashFile(path, pin.SHA256); err != nil {
		t.Errorf("second download: %s, %v", got, err)
	}

	_, err = s.Resolve(context.Background(), debSource("busybox-static", "0:0.0-no-such-version"), lang.Platform{OS: "linux", Architecture: runtime.GOARCH})
	if err == nil || !strings.Contains(err.Error(), "apt-get download busybox-static=0:0.0-no-such-version") {
		t.Errorf("err = %v, want apt-get's failure", err)
	}
}

// Without apt-get on PATH, a download says what deb: sources need.
func TestAptGetMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := (&AptGet{}).Download(context.Background(), "busybox-static", "1:1.35.0-4+b3", t.TempDir())
	want := "deb: sources are downloaded with the host's apt-get, which is not on PATH: run sbx lock and build for images with deb: sources on a Debian or Ubuntu host"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err = %v\nwant it to begin %q", err, want)
	}
}
