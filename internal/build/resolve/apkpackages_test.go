package resolve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sbx-dev/sbx/internal/build/apkrepo/apkrepotest"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// apkInstalled is an Alpine base's installed database: musl, which the
// repository also has in a newer version.
const apkInstalled = `C:Q1BBBBBBBBBBBBBBBBBBBBBBBBBBB=
P:musl
V:1.2.5-r0
A:x86_64
S:400000
I:600000
T:the musl c library (libc) implementation
p:so:libc.musl-x86_64.so.1=1
F:lib
R:ld-musl-x86_64.so.1
a:0:0:755
Z:Q1AAAAAAAAAAAAAAAAAAAAAAAAAAA=

`

// apkFixture is a signed Alpine repository over loopback TLS and an
// in-process registry to push Alpine-like bases to.
type apkFixture struct {
	repo *apkrepotest.Repo
	oci  *ociFixture
	set  *Set
}

func newApkFixture(t *testing.T) *apkFixture {
	t.Helper()
	key := apkrepotest.NewKey(t, "sbx-test-5f0a1c2d")
	repo := apkrepotest.NewRepo(t, key, []apkrepotest.Package{
		{Name: "musl", Version: "1.2.5-r9", Provides: []string{"so:libc.musl-x86_64.so.1=1"}, Files: map[string]string{"lib/ld-musl-x86_64.so.1": "newer loader\n"}},
		{Name: "tool", Version: "1.0-r0", Depends: []string{"so:libc.musl-x86_64.so.1", "libtool>=1"}, Files: map[string]string{"usr/bin/tool": "#!/bin/sh\n"}},
		{Name: "tool", Version: "2.0-r0", Depends: []string{"so:libc.musl-x86_64.so.1", "libtool>=2"}, Files: map[string]string{"usr/bin/tool": "#!/bin/sh\n"}},
		{Name: "libtool", Version: "1.0-r0", Files: map[string]string{"usr/lib/libtool.so.1": "lib 1\n"}},
		{Name: "libtool", Version: "2.1-r0", Files: map[string]string{"usr/lib/libtool.so.2": "lib 2\n"}},
		{Name: "extra", Version: "3.0-r0", Files: map[string]string{"usr/bin/extra": "#!/bin/sh\n"}},
	})
	cl := repo.Client(t)
	return &apkFixture{repo: repo, oci: newOCIFixture(t), set: New(Options{Keychain: anonymous{}, ApkRepo: cl})}
}

// baseFiles are an Alpine base's apk files naming the fixture's
// repository and trusting its key.
func (f *apkFixture) baseFiles() map[string]string {
	return map[string]string{
		"etc/alpine-release":              "3.99.0\n",
		"etc/apk/repositories":            "# the base's\n" + f.repo.Repository().URL + "\n",
		"etc/apk/keys/" + f.repo.Key.Name: string(f.repo.Key.PublicPEM()),
		"etc/apk/world":                   "musl\n",
		"lib/apk/db/installed":            apkInstalled,
	}
}

func (f *apkFixture) push(t *testing.T, tag string, layers ...v1.Layer) *lang.Source {
	t.Helper()
	img, err := mutate.AppendLayers(platformImage(t, v1.Platform{OS: "linux", Architecture: "amd64"}), layers...)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(f.oci.host + "/test/alpine:" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	return &lang.Source{Kind: lang.SourceOCI, Raw: ref.String(), Ref: ref.String()}
}

func apkImage(base *lang.Source, reqs ...string) *lang.Config {
	img := &lang.Image{Name: "dev", Platform: lang.Platform{OS: "linux", Architecture: "amd64"}, Base: base}
	img.Packages.Requests = reqs
	return &lang.Config{Images: map[string]*lang.Image{"dev": img}}
}

func apkCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestLockApkPackages locks packages over an Alpine base read from its
// registry layers: the closure is pinned as apk-package pins with the
// whole .apk's sha256 and size, the base's musl satisfies the libc
// dependency and is not pinned, a version relation is honoured, the lock
// file reads back to the same pins, and locking again with the same
// request keeps every pin with the repository gone.
func TestLockApkPackages(t *testing.T) {
	f := newApkFixture(t)
	ctx := apkCtx(t)
	base := f.push(t, "v1", tarLayer(t, f.baseFiles()))
	cfg := apkImage(base, "tool (<< 2)")
	l, _, diags := f.set.Lock(ctx, cfg, nil, false)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	in := l.Images["dev"].Inputs
	if got := strings.Join(sortedKeys(in), " "); got != "base package.libtool package.tool packages" {
		t.Fatalf("inputs %s", got)
	}
	if p := in[lockfiles.PackagesKey]; p.Kind != lockfiles.KindApkPackages || p.Source != "tool (<< 2)" || p.Digest == "" {
		t.Errorf("packages pin %+v", p)
	}
	for key, want := range map[string]string{"package.tool": "tool-1.0-r0", "package.libtool": "libtool-2.1-r0"} {
		p := in[key]
		apk := f.repo.Built[want].APK
		sum := sha256.Sum256(apk)
		if p.Kind != lockfiles.KindApkPackage || p.Source+"-"+p.Version != want || p.Architecture != "x86_64" ||
			p.Filename != "x86_64/"+want+".apk" || p.SHA256 != hex.EncodeToString(sum[:]) || p.Size != strconv.Itoa(len(apk)) {
			t.Errorf("%s pinned %+v, want %s (%d bytes, sha256 %x)", key, p, want, len(apk), sum)
		}
	}

	path := filepath.Join(t.TempDir(), "sbx.lock.hcl")
	if err := lockfiles.Write(path, l); err != nil {
		t.Fatal(err)
	}
	back, diags := lockfiles.Read(path)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if !back.Equal(l) {
		data, _ := os.ReadFile(path)
		t.Errorf("the lock file does not read back the same:\n%s", data)
	}

	f.repo.Srv.Close()
	l2, _, diags := f.set.Lock(ctx, cfg, back, false)
	if diags.HasErrors() {
		t.Fatalf("relocking without the repository: %v", diags)
	}
	if !l2.Equal(back) {
		t.Error("relocking the same request moved a pin")
	}
}

// TestLockApkPackagesBaseKeysWhitedOut: the keys the base trusts are the
// ones its top layer leaves. A base whose upper layer replaces
// /etc/apk/keys (an opaque whiteout) with another key does not trust the
// repository's key the lower layer held, and the lock fails naming the
// signature; a base naming a path on the host as a repository is refused;
// a base whose upper layer deletes /etc/apk/repositories has none, and the
// error says so.
func TestLockApkPackagesBaseKeysWhitedOut(t *testing.T) {
	f := newApkFixture(t)
	ctx := apkCtx(t)
	other := apkrepotest.NewKey(t, "other-00000000")
	swapped := f.push(t, "swapped", tarLayer(t, f.baseFiles()), tarLayer(t, map[string]string{
		"etc/apk/keys/.wh..wh..opq":  "",
		"etc/apk/keys/" + other.Name: string(other.PublicPEM()),
	}))
	_, _, diags := f.set.Lock(ctx, apkImage(swapped, "tool"), nil, false)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), f.repo.Key.Name) {
		t.Errorf("a base whose top layer replaced its keys: %v", diags)
	}

	local := f.baseFiles()
	local["etc/apk/repositories"] = "file:///etc\n"
	hostPath := f.push(t, "hostpath", tarLayer(t, local))
	_, _, diags = f.set.Lock(ctx, apkImage(hostPath, "tool"), nil, false)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "names file:///etc") {
		t.Errorf("a base naming a host path as its repository: %v", diags)
	}

	noRepos := f.push(t, "norepos", tarLayer(t, f.baseFiles()), tarLayer(t, map[string]string{"etc/apk/.wh.repositories": ""}))
	_, _, diags = f.set.Lock(ctx, apkImage(noRepos, "tool"), nil, false)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "no /etc/apk/repositories") {
		t.Errorf("a base whose top layer deleted its repositories: %v", diags)
	}
}

// TestLockApkPackagesOverrides: the image's repositories and keyring
// replace the base's; an Alpine base without apk files of its own then
// still locks. Apt source lines on an Alpine base are refused.
func TestLockApkPackagesOverrides(t *testing.T) {
	f := newApkFixture(t)
	ctx := apkCtx(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, f.repo.Key.Name), f.repo.Key.PublicPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	f.set.dir = dir
	bare := f.push(t, "bare", tarLayer(t, map[string]string{"etc/alpine-release": "3.99.0\n"}))
	cfg := apkImage(bare, "extra")
	cfg.Images["dev"].Packages.Repositories = []string{f.repo.Repository().URL}
	cfg.Images["dev"].Packages.Keyring = f.repo.Key.Name
	l, _, diags := f.set.Lock(ctx, cfg, nil, false)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if p := l.Images["dev"].Inputs["package.extra"]; p == nil || p.Version != "3.0-r0" {
		t.Errorf("inputs %v", l.Images["dev"].Inputs)
	}
	// Without the keyring the bare base trusts nothing.
	cfg.Images["dev"].Packages.Keyring = ""
	if _, _, diags := f.set.Lock(ctx, cfg, nil, false); !diags.HasErrors() || !strings.Contains(diags.Error(), "no keys") {
		t.Errorf("no keys: %v", diags)
	}
	cfg.Images["dev"].Packages.Repositories = []string{"deb https://127.0.0.1/debian stable main"}
	cfg.Images["dev"].Packages.Keyring = f.repo.Key.Name
	if _, _, diags := f.set.Lock(ctx, cfg, nil, false); !diags.HasErrors() {
		t.Error("apt sources over an Alpine base locked")
	}
}

// TestApkWorld: requests in the spec's notation become apk constraints.
func TestApkWorld(t *testing.T) {
	img := &lang.Image{}
	img.Packages.Requests = []string{"git", "curl (>= 8.5)", "tool (<< 2)", "lib=1.0-r1", "zlib>=1.3"}
	deps, err := ApkWorld(img)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range deps {
		got = append(got, d.String())
	}
	if s := strings.Join(got, " "); s != "git curl>=8.5 tool<2 lib=1.0-r1 zlib>=1.3" {
		t.Errorf("world %s", s)
	}
	img.Packages.Requests = []string{"git (>= x y)"}
	if _, err := ApkWorld(img); err == nil {
		t.Error("a bad version became a constraint")
	}
}
