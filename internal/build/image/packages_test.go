package image_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/sbx-dev/sbx/internal/proto/imageinfo"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/debrepo"
	"github.com/sbx-dev/sbx/internal/build/debrepo/debrepotest"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/build/resolve"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/recipe"
	"github.com/sbx-dev/sbx/lang"
)

func hostFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// packagesWorld is a signed test repository holding a real program and
// the C library, and a spec that installs it with the world's kernel.
func packagesWorld(t *testing.T, w *world, executables string) (*debrepotest.Repo, *lang.Config, *lockfiles.Lock) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("the fixture packages hold x86-64 programs")
	}
	trueBin := hostFile(t, "/usr/bin/true")
	repo := debrepotest.NewRepo(t, []debrepotest.Package{
		{Name: "hello", Version: "1", Arch: "amd64", Fields: map[string]string{"Depends": "libc6"},
			Files: map[string]string{"usr/bin/hello": trueBin}},
		{Name: "libc6", Version: "2", Arch: "amd64",
			Files: map[string]string{"lib/x86_64-linux-gnu/libc.so.6": hostFile(t, "/lib/x86_64-linux-gnu/libc.so.6"),
				"lib/x86_64-linux-gnu/ld-linux-x86-64.so.2": hostFile(t, "/lib64/ld-linux-x86-64.so.2"),
				"lib64/ld-linux-x86-64.so.2":                "->/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"}},
	})
	var key bytes.Buffer
	if err := repo.Key.Serialize(&key); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "keys/test.gpg"), key.String())
	writeFile(t, filepath.Join(dir, "main.hcl"), fmt.Sprintf(`image "box" {
  platform = "linux/amd64"
  size     = "64MiB"
  kernel {
    source = "deb:%s=%s"
    file   = "boot/vmlinuz-*"
  }
  packages     = ["hello"]
  repositories = ["deb %s %s main"]
  keyring      = "keys/test.gpg"
  executables  = [%s]
}
`, w.apt.pkg, w.apt.version, repo.Srv.URL, debrepotest.Suite, executables))
	w.dir = dir
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	set := resolve.New(resolve.Options{Dir: dir, Environ: w.environ, HTTPClient: w.client, Apt: w.apt,
		DebRepo: &debrepo.Client{HTTP: repo.Srv.Client(), Cache: newCache(t)}})
	lock, _, diags := set.Lock(context.Background(), cfg, nil, false)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return repo, cfg, lock
}

// TestBuildPackages builds an image with a package set twice into empty
// caches and gets the same disk; a package whose bytes no longer match
// the lock stops the build with an error naming it.
func TestBuildPackages(t *testing.T) {
	w := newWorld(t)
	repo, cfg, lock := packagesWorld(t, w, `"hello"`)
	img, li := cfg.Images["box"], lock.Lookup("box")
	if li.Inputs["package.libc6"] == nil || li.Inputs["package.hello"] == nil {
		t.Fatalf("lock inputs %v", li.Inputs)
	}
	build := func() (*image.Result, error) {
		opts := w.options(t, nil)
		opts.DebRepo = &debrepo.Client{HTTP: repo.Srv.Client()}
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
	// The inventory is in the result and in the manifest a cached build
	// is read from.
	m, err := image.ReadManifest(r1.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range [][]imageinfo.Package{r1.Packages, m.Packages} {
		names := map[string]string{}
		for _, p := range inv {
			names[p.Name] = p.Version
		}
		if names["hello"] != li.Inputs["package.hello"].Version || names["libc6"] == "" {
			t.Errorf("inventory %+v; want hello %s and libc6", inv, li.Inputs["package.hello"].Version)
		}
	}
	if len(r1.Executables) != 1 || r1.Executables[0].Name != "hello" || r1.Executables[0].Path == "" {
		t.Errorf("executables %+v", r1.Executables)
	}

	pool := "/" + li.Inputs["package.hello"].Filename
	deb := []byte(repo.Get(pool))
	bad := append([]byte(nil), deb...)
	bad[len(bad)-5] ^= 1
	repo.Set(pool, bad)
	if _, err := build(); err == nil || !strings.Contains(err.Error(), "package hello 1") {
		t.Errorf("a tampered package built: %v", err)
	}
	repo.Set(pool, deb)
}

// TestBuildPackagesMissingLibrary: a declared executable whose loader is
// not in the image stops the build, naming both.
func TestBuildPackagesMissingLibrary(t *testing.T) {
	w := newWorld(t)
	repo, cfg, lock := packagesWorld(t, w, `"hello", "/usr/lib/x86_64-linux-gnu/libc.so.6"`)
	// Drop libc6 from the lock: hello's loader and library are then
	// missing.
	li := *lock.Lookup("box")
	li.Inputs = map[string]*lockfiles.Pin{}
	for k, p := range lock.Lookup("box").Inputs {
		if k != "package.libc6" {
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
	opts.DebRepo = &debrepo.Client{HTTP: repo.Srv.Client()}
	_, err = image.Build(context.Background(), img, &li, opts)
	if err == nil || !strings.Contains(err.Error(), "executable hello") || !strings.Contains(err.Error(), "ld-linux-x86-64.so.2 is not in the image") {
		t.Fatalf("Build = %v, want an error naming hello's missing loader", err)
	}
}
