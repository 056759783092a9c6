package image_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/sbx-dev/sbx/internal/build/apkrepo"
	"github.com/sbx-dev/sbx/internal/build/apkrepo/apkrepotest"
	"github.com/sbx-dev/sbx/internal/build/archive/archivetest"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/build/resolve"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/recipe"
	"github.com/sbx-dev/sbx/lang"
)

// alpineInstalled is the base's apk database: musl, which the
// repository has in a newer version the lock must not pin.
const alpineInstalled = `C:Q1BBBBBBBBBBBBBBBBBBBBBBBBBBB=
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

// alpineWorld is a signed Alpine repository over loopback TLS holding a
// real program (the host's true) and a glibc compatibility package with
// its loader and C library, an Alpine-like base image in the world's
// registry that names the repository and trusts its key, and a spec
// that installs the program over that base.
func alpineWorld(t *testing.T, w *world) (*apkrepotest.Repo, *apkrepo.Client, *lang.Config, *lockfiles.Lock) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("the fixture packages hold x86-64 programs")
	}
	key := apkrepotest.NewKey(t, "sbx-test-61a2b3c4")
	repo := apkrepotest.NewRepo(t, key, []apkrepotest.Package{
		{Name: "hello", Version: "2.0-r0", Depends: []string{"so:libc.musl-x86_64.so.1", "gcompat-test"},
			Files: map[string]string{"usr/bin/hello": hostFile(t, "/usr/bin/true")}},
		{Name: "gcompat-test", Version: "1.1-r0", Files: map[string]string{
			"lib/libc.so.6":              hostFile(t, "/lib/x86_64-linux-gnu/libc.so.6"),
			"lib64/ld-linux-x86-64.so.2": hostFile(t, "/lib64/ld-linux-x86-64.so.2")}},
		{Name: "musl", Version: "1.2.5-r9", Provides: []string{"so:libc.musl-x86_64.so.1=1"},
			Files: map[string]string{"lib/ld-musl-x86_64.so.1": "newer loader\n"}},
		{Name: "unrelated", Version: "1.0-r0", Files: map[string]string{"usr/bin/unrelated": "#!/bin/sh\n"}},
	})
	base := archivetest.Tar(t,
		archivetest.Entry{Name: "etc/"},
		archivetest.Entry{Name: "etc/alpine-release", Body: "3.99.0\n"},
		archivetest.Entry{Name: "etc/passwd", Body: "root:x:0:0:root:/root:/bin/sh\n"},
		archivetest.Entry{Name: "etc/group", Body: "root:x:0:\n"},
		archivetest.Entry{Name: "etc/apk/"},
		archivetest.Entry{Name: "etc/apk/repositories", Body: repo.Repository().URL + "\n"},
		archivetest.Entry{Name: "etc/apk/world", Body: "musl\n"},
		archivetest.Entry{Name: "etc/apk/keys/"},
		archivetest.Entry{Name: "etc/apk/keys/" + key.Name, Body: string(key.PublicPEM())},
		archivetest.Entry{Name: "lib/"},
		archivetest.Entry{Name: "lib/ld-musl-x86_64.so.1", Body: "base loader\n", Mode: 0o755},
		archivetest.Entry{Name: "lib/apk/"},
		archivetest.Entry{Name: "lib/apk/db/"},
		archivetest.Entry{Name: "lib/apk/db/installed", Body: alpineInstalled},
		archivetest.Entry{Name: "usr/share/big", Body: bigFile()},
	)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(base)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(w.reg + "/test/alpine:3")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.hcl"), fmt.Sprintf(`image "box" {
  platform = "linux/amd64"
  base     = "%s/test/alpine:3"
  size     = "64MiB"
  kernel {
    source = "deb:%s=%s"
    file   = "boot/vmlinuz-*"
  }
  packages    = ["hello"]
  executables = ["hello"]
}
`, w.reg, w.apt.pkg, w.apt.version))
	w.dir = dir
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	// The client trusts the repository's test CA; keys come from the
	// base.
	cl := repo.Client(t)
	cl.Keys = nil
	set := resolve.New(resolve.Options{Dir: dir, Environ: w.environ, HTTPClient: w.client, Apt: w.apt,
		Keychain: authn.NewMultiKeychain(), ApkRepo: &apkrepo.Client{HTTP: cl.HTTP, Cache: newCache(t)}})
	lock, _, diags := set.Lock(context.Background(), cfg, nil, false)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return repo, &apkrepo.Client{HTTP: cl.HTTP}, cfg, lock
}

// TestBuildApkPackages locks and builds an image over an Alpine base:
// the lock pins the closure (not the base's musl), two builds into empty
// caches give the same disk, the program's loader and library are found
// in the image, the disk holds the apk database and world apk reads,
// and a package whose served bytes no longer match the lock (though
// signed by a trusted key) stops a cold build with an error naming it.
func TestBuildApkPackages(t *testing.T) {
	w := newWorld(t)
	repo, cl, cfg, lock := alpineWorld(t, w)
	img, li := cfg.Images["box"], lock.Lookup("box")
	var keys []string
	for k := range li.Inputs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if got := strings.Join(keys, " "); got != "base kernel package.gcompat-test package.hello packages" {
		t.Fatalf("lock inputs %s", got)
	}
	if p := li.Inputs["package.hello"]; p.Kind != lockfiles.KindApkPackage || p.Version != "2.0-r0" || p.Filename != "x86_64/hello-2.0-r0.apk" {
		t.Errorf("hello pinned %+v", p)
	}
	build := func() (*image.Result, error) {
		opts := w.options(t, nil)
		opts.ApkRepo = cl
		return image.Build(context.Background(), img, li, opts)
	}
	r1, err := build()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := build()
	if err != nil {
		t.Fatal(err)
	}
	if a, b := r1.Outputs[image.OutputDisk].Digest, r2.Outputs[image.OutputDisk].Digest; a != b {
		t.Errorf("two cold builds of one lock differ: %s and %s", a, b)
	}
	inv := map[string]string{}
	for _, p := range r1.Packages {
		inv[p.Name] = p.Version + " " + p.Architecture
	}
	if len(inv) != 2 || inv["hello"] != "2.0-r0 x86_64" || inv["gcompat-test"] != "1.1-r0 x86_64" {
		t.Errorf("inventory %+v", r1.Packages)
	}
	if len(r1.Executables) != 1 || r1.Executables[0].Path != "/usr/bin/hello" {
		t.Errorf("executables %+v", r1.Executables)
	}
	raw := rawDisk(t, r1.Outputs[image.OutputDisk].Path)
	db := debugfs(t, raw, "cat "+apkrepo.InstalledPath)
	for _, want := range []string{"P:musl\nV:1.2.5-r0\n", "P:hello\nV:2.0-r0\n", "P:gcompat-test\n"} {
		if !strings.Contains(db, want) {
			t.Errorf("installed database lacks %q:\n%s", want, db)
		}
	}
	if world := debugfs(t, raw, "cat "+apkrepo.WorldPath); world != "hello\nmusl\n" {
		t.Errorf("world %q", world)
	}

	p := "/main/" + li.Inputs["package.hello"].Filename
	apk := repo.Get(p)
	// Other bytes under the same name and version, validly signed by
	// the repository's key: only the lock's sha256 tells them apart.
	other := apkrepotest.BuildAPK(t, repo.Key, apkrepotest.Package{Name: "hello", Version: "2.0-r0",
		Depends: []string{"so:libc.musl-x86_64.so.1", "gcompat-test"}, Files: map[string]string{"usr/bin/hello": "#!/bin/sh\necho replaced\n"}})
	repo.Set(p, other.APK)
	if _, err := build(); err == nil || !strings.Contains(err.Error(), "package hello-2.0-r0") || !strings.Contains(err.Error(), "does not match the lock") {
		t.Errorf("a tampered package built: %v", err)
	}
	repo.Set(p, apk)
}

// TestBuildApkPackagesMissingLibrary: without the compatibility package
// the program's loader is missing and the build says so, naming both.
func TestBuildApkPackagesMissingLibrary(t *testing.T) {
	w := newWorld(t)
	_, cl, cfg, lock := alpineWorld(t, w)
	li := *lock.Lookup("box")
	li.Inputs = map[string]*lockfiles.Pin{}
	for k, p := range lock.Lookup("box").Inputs {
		if k != "package.gcompat-test" {
			li.Inputs[k] = p
		}
	}
	img := cfg.Images["box"]
	h, err := recipe.InputHash(img, li.Inputs)
	if err != nil {
		t.Fatal(err)
	}
	li.InputHash = h
	opts := w.options(t, nil)
	opts.ApkRepo = cl
	_, err = image.Build(context.Background(), img, &li, opts)
	if err == nil || !strings.Contains(err.Error(), "executable hello") || !strings.Contains(err.Error(), "ld-linux-x86-64.so.2 is not in the image") {
		t.Fatalf("Build = %v, want an error naming hello's missing loader", err)
	}
}
