package resolve

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/sbx-dev/sbx/internal/build/debrepo/debrepotest"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

func debPkg(name, version string, fields map[string]string) debrepotest.Package {
	return debrepotest.Package{Name: name, Version: version, Arch: "amd64", Fields: fields,
		Files: map[string]string{"usr/share/doc/" + name + "/copyright": name + "\n"}}
}

func packagesImage(repoURL string, reqs ...string) *lang.Config {
	img := &lang.Image{Name: "dev", Platform: lang.Platform{OS: "linux", Architecture: "amd64"}}
	img.Packages.Requests = reqs
	img.Packages.Repositories = []string{"deb " + repoURL + " " + debrepotest.Suite + " main"}
	return &lang.Config{Images: map[string]*lang.Image{"dev": img}}
}

// TestLockPackages locks an image's packages against a signed test
// repository: every package of the closure is pinned, the lock file reads
// back, a second lock with the same request keeps the pins without
// touching the network, and a changed request re-resolves while keeping
// the versions of packages already pinned.
func TestLockPackages(t *testing.T) {
	repo := debrepotest.NewRepo(t, []debrepotest.Package{
		debPkg("tool", "1.0", map[string]string{"Depends": "libtool (>= 1)"}),
		debPkg("libtool", "1.0", nil),
		debPkg("extra", "2.0", map[string]string{"Depends": "libtool"}),
		debPkg("shell", "1.0", map[string]string{"Essential": "yes"}),
	})
	s := New(Options{DebRepo: repo.Client(t)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cfg := packagesImage(repo.Srv.URL, "tool")
	l1, changes, diags := s.Lock(ctx, cfg, nil, false)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	img := l1.Images["dev"]
	if got := strings.Join(sortedKeys(img.Inputs), " "); got != "package.libtool package.shell package.tool packages" {
		t.Fatalf("inputs %s", got)
	}
	if len(changes) != 4 {
		t.Errorf("%d changes, want 4", len(changes))
	}
	p := img.Inputs["package.tool"]
	if p.Kind != lockfiles.KindDebPackage || p.Version != "1.0" || p.Architecture != "amd64" || p.Filename != "pool/main/t/tool_1.0_amd64.deb" || len(p.SHA256) != 64 || p.Size == "" {
		t.Errorf("pin %+v", p)
	}
	if img.InputHash == "" {
		t.Fatal("no input hash")
	}
	data := lockfiles.Marshal(l1)
	back, pd := lockfiles.Parse(data, "sbx.lock.hcl")
	if pd.HasErrors() || !back.Equal(l1) {
		t.Fatalf("lock does not read back: %v\n%s", pd, data)
	}
	if !bytes.Contains(data, []byte(`architecture = "amd64"`)) {
		t.Errorf("lock file lacks the architecture:\n%s", data)
	}

	// Same request, repository gone: the pins stay.
	repo.Srv.Close()
	l2, changes, diags := s.Lock(ctx, cfg, l1, false)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if !l2.Equal(l1) || len(changes) != 0 {
		t.Fatalf("relock changed the lock: %v", changes)
	}
	// Declaration order does not matter either.
	cfg2 := packagesImage(repo.Srv.URL, "tool")
	if _, _, diags := s.Lock(ctx, cfg2, l1, false); diags.HasErrors() {
		t.Fatal(diags)
	}
}

func TestLockPackagesChangedRequest(t *testing.T) {
	pkgs := []debrepotest.Package{
		debPkg("tool", "1.0", map[string]string{"Depends": "libtool"}),
		debPkg("libtool", "1.0", nil),
		debPkg("extra", "2.0", map[string]string{"Depends": "libtool"}),
	}
	repo := debrepotest.NewRepo(t, pkgs)
	s := New(Options{DebRepo: repo.Client(t)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l1, _, diags := s.Lock(ctx, packagesImage(repo.Srv.URL, "tool"), nil, false)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	// A newer libtool appears (in a repository with another address, so
	// the request's digest changes too); adding "extra" must not move
	// libtool, upgrading must.
	newer := debrepotest.NewRepo(t, append(pkgs, debPkg("libtool", "1.1", nil)))
	s = New(Options{DebRepo: newer.Client(t)})
	l2, changes, diags := s.Lock(ctx, packagesImage(newer.Srv.URL, "tool", "extra"), l1, false)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if v := l2.Images["dev"].Inputs["package.libtool"].Version; v != "1.0" {
		t.Errorf("adding a package moved libtool to %s", v)
	}
	var added []string
	for _, c := range changes {
		if c.Old == nil {
			added = append(added, c.Key)
		}
	}
	if strings.Join(added, " ") != "package.extra" {
		t.Errorf("added %v", added)
	}
	l3, _, diags := s.Lock(ctx, packagesImage(newer.Srv.URL, "tool", "extra"), l2, true)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if v := l3.Images["dev"].Inputs["package.libtool"].Version; v != "1.1" {
		t.Errorf("upgrade left libtool at %s", v)
	}
	if l3.Images["dev"].InputHash == l2.Images["dev"].InputHash {
		t.Error("a moved package left the input hash")
	}
}

// TestLockPackagesConflictIsADiagnostic: a conflict in the closure is an
// error diagnostic naming both packages, and the image gets no input
// hash.
func TestLockPackagesConflictIsADiagnostic(t *testing.T) {
	repo := debrepotest.NewRepo(t, []debrepotest.Package{
		debPkg("aa", "1", map[string]string{"Depends": "bb", "Conflicts": "cc"}),
		debPkg("bb", "1", map[string]string{"Depends": "cc"}),
		debPkg("cc", "1", nil),
	})
	s := New(Options{DebRepo: repo.Client(t)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, _, diags := s.Lock(ctx, packagesImage(repo.Srv.URL, "aa"), nil, false)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "aa 1 (amd64) conflicts cc") || !strings.Contains(diags.Error(), "aa depends on bb, bb depends on cc") {
		t.Fatalf("diagnostics %v", diags)
	}
	if l.Images["dev"].InputHash != "" {
		t.Error("a failed image got an input hash")
	}
}

// tarLayer is an uncompressed layer holding files (path → content); a
// path whose base starts with ".wh." is a whiteout.
func tarLayer(t *testing.T, files map[string]string) v1.Layer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, p := range sortedKeys(files) {
		if err := tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: int64(len(files[p])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(files[p]))
	}
	tw.Close()
	data := b.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLockPackagesOnDebianBase: packages a base image's dpkg status lists
// satisfy dependencies and are not pinned, and no essential packages are
// added; a base whose status a higher layer deletes counts as having no
// dpkg database.
func TestLockPackagesOnDebianBase(t *testing.T) {
	repo := debrepotest.NewRepo(t, []debrepotest.Package{
		debPkg("tool", "1.0", map[string]string{"Depends": "libtool (>= 1)"}),
		debPkg("libtool", "1.0", nil),
		debPkg("shell", "1.0", map[string]string{"Essential": "yes"}),
	})
	f := newOCIFixture(t)
	status := "Package: libtool\nStatus: install ok installed\nVersion: 1.0\nArchitecture: amd64\n\nPackage: shell\nStatus: install ok installed\nVersion: 1.0\nArchitecture: amd64\nEssential: yes\n\n"
	push := func(tag string, layers ...v1.Layer) *lang.Source {
		img, err := mutate.AppendLayers(platformImage(t, v1.Platform{OS: "linux", Architecture: "amd64"}), layers...)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := name.ParseReference(f.host + "/test/debian:" + tag)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
		return &lang.Source{Kind: lang.SourceOCI, Raw: ref.String(), Ref: ref.String()}
	}
	statusImage := func() v1.Image {
		img, err := mutate.AppendLayers(platformImage(t, v1.Platform{OS: "linux", Architecture: "amd64"}), tarLayer(t, map[string]string{"var/lib/dpkg/status": status}))
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	withStatus := push("status", tarLayer(t, map[string]string{"var/lib/dpkg/status": status}))
	// The same base in an OCI layout in the configuration directory.
	cfgDir := filepath.Join(t.TempDir(), "cfg")
	lp, err := layout.Write(filepath.Join(cfgDir, "images"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	layoutImage := statusImage()
	if err := lp.AppendImage(layoutImage, layout.WithAnnotations(map[string]string{refNameAnnotation: "v1"})); err != nil {
		t.Fatal(err)
	}
	deleted := push("deleted", tarLayer(t, map[string]string{"var/lib/dpkg/status": status}), tarLayer(t, map[string]string{"var/lib/.wh.dpkg": ""}))

	s := New(Options{Dir: cfgDir, DebRepo: repo.Client(t), Keychain: anonymous{}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		base *lang.Source
		want string
	}{
		{withStatus, "base package.tool packages"},
		{layoutSource("v1"), "base package.tool packages"},
		{deleted, "base package.libtool package.shell package.tool packages"},
	} {
		cfg := packagesImage(repo.Srv.URL, "tool")
		cfg.Images["dev"].Base = tc.base
		l, _, diags := s.Lock(ctx, cfg, nil, false)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		if got := strings.Join(sortedKeys(l.Images["dev"].Inputs), " "); got != tc.want {
			t.Errorf("%s: inputs %s, want %s", tc.base.Raw, got, tc.want)
		}
	}

	// A layout layer whose bytes no longer match its digest is an error,
	// not a status.
	ls, err := layoutImage.Layers()
	if err != nil {
		t.Fatal(err)
	}
	h, err := ls[len(ls)-1].Digest()
	if err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(cfgDir, "images", "blobs", "sha256", h.Hex)
	// Another well-formed layer under the same name: only its digest
	// tells it apart.
	other := tarLayer(t, map[string]string{"var/lib/dpkg/status": strings.ReplaceAll(status, "libtool", "libtooX")})
	rc, err := other.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blob, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := packagesImage(repo.Srv.URL, "tool")
	cfg.Images["dev"].Base = layoutSource("v1")
	if _, _, diags := s.Lock(ctx, cfg, nil, true); !diags.HasErrors() || !strings.Contains(diags.Error(), "sha256") {
		t.Errorf("a tampered base layer: %v", diags)
	}
}
