package recipe

import (
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// TestInputHashCoversPackagePins: every field of every package pin, a
// package added or removed, and the executables move the hash.
func TestInputHashCoversPackagePins(t *testing.T) {
	pins := func() map[string]*lockfiles.Pin {
		p := samplePins()
		p[lockfiles.PackagesKey] = &lockfiles.Pin{Source: "git", Kind: lockfiles.KindDebPackages, Digest: "sha256:" + strings.Repeat("1", 64)}
		p["package.git"] = &lockfiles.Pin{Source: "git", Kind: lockfiles.KindDebPackage, Version: "1:2.39.5-0+deb12u2", Architecture: "amd64",
			Filename: "pool/main/g/git/git_2.39.5-0+deb12u2_amd64.deb", SHA256: strings.Repeat("2", 64), Size: "100"}
		return p
	}
	img := sampleImage()
	img.Packages.Requests = []string{"git"}
	base := mustHash(t, img, pins())
	for name, f := range map[string]func(map[string]*lockfiles.Pin){
		"version":      func(p map[string]*lockfiles.Pin) { p["package.git"].Version = "1:2.39.5-0+deb12u3" },
		"architecture": func(p map[string]*lockfiles.Pin) { p["package.git"].Architecture = "arm64" },
		"filename":     func(p map[string]*lockfiles.Pin) { p["package.git"].Filename = "pool/x.deb" },
		"sha256":       func(p map[string]*lockfiles.Pin) { p["package.git"].SHA256 = strings.Repeat("3", 64) },
		"size":         func(p map[string]*lockfiles.Pin) { p["package.git"].Size = "101" },
		"request": func(p map[string]*lockfiles.Pin) {
			p[lockfiles.PackagesKey].Digest = "sha256:" + strings.Repeat("4", 64)
		},
		"added": func(p map[string]*lockfiles.Pin) {
			c := *p["package.git"]
			p["package.git-man"] = &c
		},
		"removed": func(p map[string]*lockfiles.Pin) { delete(p, "package.git") },
	} {
		ps := pins()
		f(ps)
		if mustHash(t, img, ps) == base {
			t.Errorf("changing the package pins' %s left the hash", name)
		}
	}
	img.Packages.Executables = []string{"git"}
	if mustHash(t, img, pins()) == base {
		t.Error("executables do not change the hash")
	}
	// An image without packages hashes without the pins.
	plain := sampleImage()
	if mustHash(t, plain, pins()) != mustHash(t, plain, samplePins()) {
		t.Error("package pins change the hash of an image without packages")
	}
	img.Packages.Executables = nil
	p := pins()
	delete(p, lockfiles.PackagesKey)
	if _, err := InputHash(img, p); err == nil {
		t.Error("an image with packages hashed without its packages pin")
	}
}

// TestCheckImageLockedPackages: package pins count as used while the
// image has packages; a changed request, or pins the image no longer
// asks for, make the lock out of date.
func TestCheckImageLockedPackages(t *testing.T) {
	img := &lang.Image{Name: "dev", Platform: lang.Platform{OS: "linux", Architecture: "amd64"}}
	img.Packages.Requests = []string{"git", "jq"}
	pins := map[string]*lockfiles.Pin{
		lockfiles.PackagesKey: {Source: "git, jq", Kind: lockfiles.KindDebPackages, Digest: "sha256:" + strings.Repeat("1", 64)},
		"package.git":         {Source: "git", Kind: lockfiles.KindDebPackage, Version: "1", Architecture: "amd64", Filename: "pool/g.deb", SHA256: strings.Repeat("2", 64), Size: "1"},
	}
	h, err := InputHash(img, pins)
	if err != nil {
		t.Fatal(err)
	}
	l := &lockfiles.Image{Name: "dev", Platform: "linux/amd64", InputHash: h, Inputs: pins}
	if err := CheckImageLocked(img, l); err != nil {
		t.Fatalf("up-to-date lock: %v", err)
	}
	changed := *img
	changed.Packages.Requests = []string{"git"}
	if err := CheckImageLocked(&changed, l); err == nil || !strings.Contains(err.Error(), `packages are locked for "git, jq" but the spec declares "git"`) {
		t.Errorf("changed request: %v", err)
	}
	none := *img
	none.Packages.Requests = nil
	if err := CheckImageLocked(&none, l); err == nil || !strings.Contains(err.Error(), "the lock pins package.git") {
		t.Errorf("packages dropped: %v", err)
	}
}
