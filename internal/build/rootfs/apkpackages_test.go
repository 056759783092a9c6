package rootfs

import (
	"context"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/apkrepo"
	"github.com/sbx-dev/sbx/internal/build/apkrepo/apkrepotest"
)

// TestAssembleApkPackages: over an Alpine base, the fetcher is handed
// what the base's apk files say (repositories, keys), and the packages
// it returns are installed: the base's database records kept and the
// package's added, the request added to the world. Over a base that is
// not Alpine the build stops before anything is fetched.
func TestAssembleApkPackages(t *testing.T) {
	key := apkrepotest.NewKey(t, "sbx-test-0a0b0c0d")
	repo := apkrepotest.NewRepo(t, key, []apkrepotest.Package{
		{Name: "tool", Version: "1.0-r0", Files: map[string]string{"usr/bin/tool": "#!/bin/sh\nexit 0\n"}},
	})
	img := loadImage(t, `image "agent" {
  base        = "registry.test/alpine:3"
  packages    = ["tool (>= 1)"]
  executables = ["tool"]
}`)
	world, err := apkWorldOf(img.Packages.Requests)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	alpine := tarOf(t,
		dirEnt("etc/", 0o755), dirEnt("etc/apk/", 0o755), dirEnt("etc/apk/keys/", 0o755),
		fileEnt("etc/alpine-release", 0o644, 0, 0, "3.99.0\n"),
		fileEnt("etc/apk/repositories", 0o644, 0, 0, repo.Repository().URL+"\n"),
		fileEnt("etc/apk/keys/"+key.Name, 0o644, 0, 0, string(key.PublicPEM())),
		fileEnt("etc/apk/world", 0o644, 0, 0, "busybox\n"),
		dirEnt("bin/", 0o755), fileEnt("bin/sh", 0o755, 0, 0, "not a script\n"),
		dirEnt("lib/", 0o755), dirEnt("lib/apk/", 0o755), dirEnt("lib/apk/db/", 0o755),
		fileEnt("lib/apk/db/installed", 0o644, 0, 0, "C:Q1AAAAAAAAAAAAAAAAAAAAAAAAAAA=\nP:busybox\nV:1.36.1-r0\nA:x86_64\n\n"),
	)
	var seen *apkrepo.Base
	fetchFrom := func(ctx context.Context, base *apkrepo.Base) ([]apkrepo.Fetched, apkrepo.Keys, error) {
		seen = base
		c := repo.Client(t)
		c.Keys = base.Keys
		var out []apkrepo.Fetched
		for _, b := range repo.Built {
			p := &apkrepo.Package{Name: b.Name, Version: b.Version, Arch: "x86_64", Checksum: b.Identity, Size: int64(len(b.APK)), Repository: base.Repositories[0].URL}
			f, err := c.Fetch(ctx, p)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, f)
		}
		return out, base.Keys, nil
	}
	tree, err := Assemble(context.Background(), img, Inputs{"base": ociInput(t, dir, nil, alpine)}, Options{Apk: &ApkPackages{World: world, Fetch: fetchFrom}})
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	if seen == nil || len(seen.Repositories) != 1 || seen.Repositories[0].URL != repo.Repository().URL || seen.Keys[key.Name] == nil {
		t.Errorf("the fetcher was handed %+v", seen)
	}
	db := readTreeString(t, tree, apkrepo.InstalledPath)
	if !strings.Contains(db, "P:busybox\n") || !strings.Contains(db, "P:tool\nV:1.0-r0\n") {
		t.Errorf("installed database:\n%s", db)
	}
	if w := readTreeString(t, tree, apkrepo.WorldPath); w != "busybox\ntool>=1\n" {
		t.Errorf("world %q", w)
	}

	called := false
	notAlpine := tarOf(t, dirEnt("etc/", 0o755), fileEnt("etc/os-release", 0o644, 0, 0, "ID=debian\n"))
	_, err = Assemble(context.Background(), img, Inputs{"base": ociInput(t, dir, nil, notAlpine)}, Options{Apk: &ApkPackages{World: world,
		Fetch: func(context.Context, *apkrepo.Base) ([]apkrepo.Fetched, apkrepo.Keys, error) {
			called = true
			return nil, nil, nil
		}}})
	if err == nil || called || !strings.Contains(err.Error(), "neither /etc/alpine-release") {
		t.Errorf("Alpine packages over a Debian base: %v (fetched: %v)", err, called)
	}
}

// apkWorldOf turns requests written "NAME (>= V)" into apk constraints,
// as builders/resolve does for a build.
func apkWorldOf(reqs []string) ([]apkrepo.Dep, error) {
	var out []apkrepo.Dep
	for _, r := range reqs {
		r = strings.NewReplacer(" ", "", "(", "", ")", "").Replace(r)
		d, err := apkrepo.ParseDep(r)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}
