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

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/internal/build/apt"
	"github.com/sbx-dev/sbx/internal/build/digest"
	"github.com/sbx-dev/sbx/lang"
)

// fakeApt writes a .deb named as apt-get names it, and answers version
// look-ups from policy. It is the seam for the machine's apt sources,
// which a test cannot control.
type fakeApt struct {
	content  []byte            // the bytes of every .deb not in debs
	debs     map[string][]byte // "name=version" → the bytes of that .deb
	fileVer  string            // version written into the file name; "" means as asked
	calls    []string
	lastDir  string
	fileArch string
	policy   map[string]fakePolicy // name → what apt-cache policy would say
}

type fakePolicy struct {
	candidate string
	available []string
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
	content, ok := a.debs[name+"="+version]
	if !ok {
		content = a.content
	}
	path := filepath.Join(dir, pkg+"_"+strings.ReplaceAll(v, ":", "%3a")+"_"+arch+".deb")
	return path, os.WriteFile(path, content, 0o644)
}

func (a *fakeApt) Versions(_ context.Context, name string) (string, []string, error) {
	a.calls = append(a.calls, "policy "+name)
	p := a.policy[name]
	return p.candidate, p.available, nil
}

func debSource(name, version string) *lang.Source {
	return &lang.Source{Kind: lang.SourceDeb, Raw: "deb:" + name + "=" + version, Ref: name, Version: version}
}

// parseDeb parses a deb: source as a spec writes it.
func parseDeb(t *testing.T, raw string) *lang.Source {
	t.Helper()
	src, err := lang.ParseSource(raw, hcl.Range{})
	if err != nil {
		t.Fatal(err)
	}
	return src
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
	fake := &fakeApt{content: []byte("!<arch>\ndebian-binary fake"), fileArch: host}
	s := New(Options{Apt: fake})
	hostPlatform := lang.Platform{OS: "linux", Architecture: runtime.GOARCH}
	pin, err := s.Resolve(context.Background(), debSource("busybox-static", "1:1.36.1-9"), hostPlatform)
	if err != nil {
		t.Fatal(err)
	}
	wantFile := "busybox-static_1%3a1.36.1-9_" + host + ".deb"
	if pin.Version != "1:1.36.1-9" || pin.Filename != wantFile || pin.SHA256 != sha256Hex(fake.content) || pin.Kind != "deb" {
		t.Errorf("pin = %+v", pin)
	}
	if len(fake.calls) != 1 || fake.calls[0] != "busybox-static=1:1.36.1-9" {
		t.Errorf("apt calls = %q, want the native name without qualifier", fake.calls)
	}
	if _, err := os.Stat(fake.lastDir); !os.IsNotExist(err) {
		t.Errorf("download directory %s was left behind", fake.lastDir)
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
	if got := fake.calls[len(fake.calls)-1]; got != "linux-image-cloud:"+fa+"=6.1.0-1" || !strings.HasSuffix(pin.Filename, "_"+fa+".deb") {
		t.Errorf("call %q, file %s: want an %s qualifier", got, pin.Filename, fa)
	}

	// A downloader that hands back another version is caught.
	fake.fileVer = "1:1.35.0-1"
	_, err = s.Resolve(context.Background(), debSource("busybox-static", "1:1.36.1-9"), hostPlatform)
	if err == nil || !strings.Contains(err.Error(), "want busybox-static 1:1.36.1-9") {
		t.Errorf("err = %v, want a version mismatch", err)
	}
	// Without a version apt is asked for one; this apt knows none.
	_, err = s.Resolve(context.Background(), parseDeb(t, "deb:busybox-static"), hostPlatform)
	if err == nil || !strings.Contains(err.Error(), "apt has no version of busybox-static: check the name, or run apt-get update") {
		t.Errorf("err = %v, want apt's lack of a version", err)
	}
	// A downloader that cannot list versions needs an exact one.
	_, err = New(Options{Apt: struct{ apt.Downloader }{fake}}).Resolve(context.Background(), parseDeb(t, "deb:busybox-static"), hostPlatform)
	if err == nil || !strings.Contains(err.Error(), "cannot list versions; name an exact version") {
		t.Errorf("err = %v, want a request for an exact version", err)
	}
}

// TestDebPicksVersion resolves sources without an exact version against
// what apt offers: the candidate when it satisfies the relations, else
// the newest version that does.
func TestDebPicksVersion(t *testing.T) {
	host := hostDebArch(t)
	hostPlatform := lang.Platform{OS: "linux", Architecture: runtime.GOARCH}
	fake := &fakeApt{content: []byte("deb"), fileArch: host, policy: map[string]fakePolicy{
		"busybox-static": {candidate: "1:1.35.0-4+deb12u1+b1", available: []string{"1:1.35.0-4+deb12u1+b1", "1:1.35.0-4+b3", "1:1.30.1-6+b3"}},
		// The candidate is pinned lower than the newest version offered.
		"ca-certificates": {candidate: "20230311+deb12u1", available: []string{"20250419~deb12u2", "20230311+deb12u1", "20230311"}},
	}}
	s := New(Options{Apt: fake})
	for _, tc := range []struct {
		src, want, err string
	}{
		{src: "deb:busybox-static", want: "1:1.35.0-4+deb12u1+b1"},
		{src: "deb:busybox-static>=1:1.35", want: "1:1.35.0-4+deb12u1+b1"},
		{src: "deb:busybox-static<<1:1.35.0-4+deb12u1", want: "1:1.35.0-4+b3"},
		{src: "deb:busybox-static<=1:1.35,>>1.36", want: "1:1.30.1-6+b3"},
		{src: "deb:busybox-static>>1:1.35.0-4+deb12u1+b1",
			err: "apt offers busybox-static 1:1.35.0-4+deb12u1+b1, 1:1.35.0-4+b3, 1:1.30.1-6+b3, none of them >>1:1.35.0-4+deb12u1+b1 (apt's candidate is 1:1.35.0-4+deb12u1+b1"},
		{src: "deb:ca-certificates", want: "20230311+deb12u1"},
		{src: "deb:ca-certificates>=20250419~", want: "20250419~deb12u2"},
		{src: "deb:ca-certificates<<20230311+", want: "20230311"},
		// An exact version is downloaded as it is; apt is not asked.
		{src: "deb:ca-certificates=20220614", want: "20220614"},
	} {
		fake.calls = nil
		pin, err := s.Resolve(context.Background(), parseDeb(t, tc.src), hostPlatform)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err = %v, want %q", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		src := parseDeb(t, tc.src)
		if pin.Version != tc.want || pin.Filename != src.Ref+"_"+strings.ReplaceAll(tc.want, ":", "%3a")+"_"+host+".deb" {
			t.Errorf("%s: pinned %s (%s), want %s", tc.src, pin.Version, pin.Filename, tc.want)
		}
		wantCalls := []string{"policy " + src.Ref, src.Ref + "=" + tc.want}
		if strings.Contains(tc.src, "=2022") {
			wantCalls = wantCalls[1:]
		}
		if strings.Join(fake.calls, " ") != strings.Join(wantCalls, " ") {
			t.Errorf("%s: apt calls %q, want %q", tc.src, fake.calls, wantCalls)
		}
	}
}

// TestDebVersionOrder checks Debian's version ordering as the relations
// use it: epochs first, then the upstream version and the revision, each
// compared in runs of non-digits (letters before other characters, ~
// before everything, even the end) and numbers. Where dpkg is installed,
// every row is also checked against dpkg --compare-versions.
func TestDebVersionOrder(t *testing.T) {
	dpkg, _ := exec.LookPath("dpkg")
	for _, tc := range []struct {
		a, op, b string
		want     bool
	}{
		// Epochs outweigh everything after them.
		{"1:1.0", ">>", "2.0", true},
		{"1:1.35.0-4", ">>", "1.99", true},
		{"0:1.0", "=", "1.0", true},
		{"2:0.1", ">>", "1:9.9", true},
		// Tildes sort before anything, even the end of the string.
		{"1.0~rc1", "<<", "1.0", true},
		{"1.0~~", "<<", "1.0~", true},
		{"1.0~rc1", "<<", "1.0~rc2", true},
		{"20250419~deb12u2", ">>", "20250419~deb12u1", true},
		{"20250419~deb12u2", "<<", "20250419", true},
		{"1.37~", "<=", "1.37", true},
		// Revisions break ties of the upstream version.
		{"1.0-1", "<<", "1.0-2", true},
		{"1.0-9", "<<", "1.0-10", true},
		{"1.0", "=", "1.0-0", true},
		{"6.1.192-3", ">>", "6.1.176-1", true},
		{"2.36-9+deb12u13", "<<", "2.36-10", true},
		{"1:1.35.0-4+deb12u1+b1", ">>", "1:1.35.0-4+b3", true},
		// Letters sort before other characters, numbers compare as
		// numbers.
		{"1.0a", ">>", "1.0", true},
		{"1.0+b1", ">>", "1.0", true},
		{"1.0.1", ">>", "1.0+b1", true},
		{"1.01", "=", "1.1", true},
		{"1.10", ">>", "1.9", true},
		{"1.0", ">=", "1.0", true},
		{"1.0", "<=", "1.0", true},
		{"1.0", ">>", "1.0", false},
		{"1.0", "<<", "1.0", false},
		{"1.0", "=", "1.0.0", false},
	} {
		rel := []lang.DebRelation{{Op: tc.op, Version: tc.b}}
		if got := debSatisfies(tc.a, rel); got != tc.want {
			t.Errorf("%s %s %s = %v, want %v", tc.a, tc.op, tc.b, got, tc.want)
		}
		if dpkg == "" {
			continue
		}
		op := map[string]string{"=": "eq", ">=": "ge", "<=": "le", ">>": "gt", "<<": "lt"}[tc.op]
		err := exec.Command(dpkg, "--compare-versions", tc.a, op, tc.b).Run()
		if (err == nil) != tc.want {
			t.Errorf("dpkg --compare-versions %s %s %s: %v, but the table says %v", tc.a, op, tc.b, err, tc.want)
		}
	}
	if debSatisfies("not a version", nil) || debSatisfies("1.0", []lang.DebRelation{{Op: ">=", Version: ""}}) {
		t.Error("an unparsable version satisfied a relation")
	}
	got := newestFirst([]string{"1.0-1", "1:0.9", "junk version", "1.0~rc1", "1.0-10"})
	if want := "1:0.9 1.0-10 1.0-1 1.0~rc1 junk version"; strings.Join(got, " ") != want {
		t.Errorf("newestFirst = %s, want %s", strings.Join(got, " "), want)
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
		t.Skip("SKIPPED: apt-get is not installed; the real apt downloader is untested on this machine")
	}
	out, err := exec.Command("apt-cache", "policy", "busybox-static").Output()
	m := regexp.MustCompile(`Candidate: (\S+)`).FindSubmatch(out)
	if err != nil || m == nil || string(m[1]) == "(none)" {
		t.Skip("SKIPPED: apt has no candidate for busybox-static (run apt-get update?); the real apt downloader is untested on this machine")
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
	path, err := (&apt.Get{}).Download(context.Background(), "busybox-static", version, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := digest.File(context.Background(), path); err != nil || got != pin.SHA256 {
		t.Errorf("second download: %s, %v; want %s", got, err, pin.SHA256)
	}

	_, err = s.Resolve(context.Background(), debSource("busybox-static", "0:0.0-no-such-version"), lang.Platform{OS: "linux", Architecture: runtime.GOARCH})
	if err == nil || !strings.Contains(err.Error(), "apt-get download busybox-static=0:0.0-no-such-version") {
		t.Errorf("err = %v, want apt-get's failure", err)
	}
}
