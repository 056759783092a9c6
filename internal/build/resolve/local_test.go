package resolve

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/lang"
)

// loadImage writes main.hcl into dir and loads its image "a".
func loadImage(t *testing.T, dir, spec string) *lang.Image {
	t.Helper()
	writeFile(t, filepath.Join(dir, "main.hcl"), spec)
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatalf("loading %s: %v", dir, diags)
	}
	return cfg.Images["a"]
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestLocalFileSymlinkEscape plays a checkout whose spec names files
// inside the configuration directory that are symbolic links to the
// user's SSH key: locking must refuse them, naming the spec position and
// the path, while links that stay inside the directory still work.
func TestLocalFileSymlinkEscape(t *testing.T) {
	top := t.TempDir()
	home := filepath.Join(top, "home")
	writeFile(t, filepath.Join(home, ".ssh", "id_rsa"), "PRIVATE KEY\n")
	dir := filepath.Join(top, "checkout")
	symlink(t, "../../home/.ssh/id_rsa", filepath.Join(dir, "files", "key"))
	symlink(t, filepath.Join(home, ".ssh"), filepath.Join(dir, "ssh"))
	writeFile(t, filepath.Join(dir, "real", "motd"), "hello\n")
	symlink(t, "../real/motd", filepath.Join(dir, "files", "motd"))

	img := loadImage(t, dir, `
image "a" {
  artifact "key" {
    source = "file:files/key"
    dest   = "/root/key"
  }
  artifact "dirlink" {
    source = "file:ssh/id_rsa"
    dest   = "/root/key2"
  }
  artifact "motd" {
    source = "file:files/motd"
    dest   = "/etc/motd"
  }
}
`)
	s := New(Options{Dir: dir})
	ctx := context.Background()
	for i, line := range map[int]int{0: 4, 1: 8} {
		src := img.Artifacts[i].Source
		pin, err := s.Resolve(ctx, src, linuxAMD64)
		if err == nil {
			t.Errorf("%s: locked as %+v; the link leads outside the configuration directory", src.Raw, pin)
			continue
		}
		for _, want := range []string{"main.hcl:" + strconv.Itoa(line), "leads outside the configuration directory", src.Raw} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: err = %v, want it to say %q", src.Raw, err, want)
			}
		}
	}
	pin, err := s.Resolve(ctx, img.Artifacts[2].Source, linuxAMD64)
	if err != nil || pin.SHA256 != sha256Hex([]byte("hello\n")) {
		t.Errorf("a link inside the directory: pin = %+v, err = %v", pin, err)
	}

	// A source built in code, past lang's check of the path as written,
	// is refused all the same.
	abs := &lang.Source{Kind: lang.SourceFile, Raw: "file:" + filepath.Join(home, ".ssh", "id_rsa"), Ref: filepath.Join(home, ".ssh", "id_rsa")}
	if pin, err := s.Resolve(ctx, abs, linuxAMD64); err == nil {
		t.Errorf("%s: locked as %+v without host_paths", abs.Raw, pin)
	}
}

// TestLocalFileHostPaths checks the opt-in: a file under a directory the
// image lists in host_paths is read, and a link inside that directory
// leading out of it is refused.
func TestLocalFileHostPaths(t *testing.T) {
	top := t.TempDir()
	models := filepath.Join(top, "models")
	writeFile(t, filepath.Join(models, "llm.bin"), "weights")
	writeFile(t, filepath.Join(top, "secret"), "secret")
	symlink(t, "../secret", filepath.Join(models, "leak"))
	dir := filepath.Join(top, "cfg")
	img := loadImage(t, dir, `
image "a" {
  host_paths = ["`+models+`"]
  artifact "llm" {
    source = "file:`+filepath.Join(models, "llm.bin")+`"
    dest   = "/models/llm.bin"
  }
  artifact "leak" {
    source = "file:../models/leak"
    dest   = "/leak"
  }
}
`)
	s := New(Options{Dir: dir})
	pin, err := s.Resolve(context.Background(), img.Artifacts[0].Source, linuxAMD64)
	if err != nil || pin.SHA256 != sha256Hex([]byte("weights")) {
		t.Errorf("a file under host_paths: pin = %+v, err = %v", pin, err)
	}
	_, err = s.Resolve(context.Background(), img.Artifacts[1].Source, linuxAMD64)
	if err == nil || !strings.Contains(err.Error(), "leads outside the host path "+models) {
		t.Errorf("a link out of the host path: err = %v", err)
	}
}

// TestLayoutSymlinkEscape plays an OCI layout in the checkout whose blob
// is a symbolic link to a file outside it (with the right digest, so only
// the confinement stops it), and a layout directory that is itself a link
// out of the configuration directory.
func TestLayoutSymlinkEscape(t *testing.T) {
	f := newOCIFixture(t)
	dir := writeLayout(t, f)
	h, err := f.index.Digest()
	if err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(dir, "images", "blobs", "sha256", h.Hex)
	outside := filepath.Join(t.TempDir(), "index-blob")
	b, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, outside, string(b))
	if err := os.Remove(blob); err != nil {
		t.Fatal(err)
	}
	symlink(t, outside, blob)
	s := New(Options{Dir: dir})
	_, err = s.Resolve(context.Background(), layoutSource("v1"), linuxAMD64)
	if err == nil || !strings.Contains(err.Error(), "leads outside the layout directory") {
		t.Errorf("a blob linked out of the layout: err = %v", err)
	}

	other := writeLayout(t, f)
	dir = filepath.Join(t.TempDir(), "cfg")
	symlink(t, filepath.Join(other, "images"), filepath.Join(dir, "images"))
	s = New(Options{Dir: dir})
	_, err = s.Resolve(context.Background(), layoutSource("v1"), linuxAMD64)
	if err == nil || !strings.Contains(err.Error(), "leads outside the configuration directory") {
		t.Errorf("a layout directory linked out of the configuration directory: err = %v", err)
	}
}

// TestLockRefusesSymlinkEscape runs sbx lock's step on a checkout whose
// file: source is a link to a key outside it: the diagnostic points at the
// source in the spec and names the path, and nothing is pinned.
func TestLockRefusesSymlinkEscape(t *testing.T) {
	top := t.TempDir()
	writeFile(t, filepath.Join(top, "id_rsa"), "PRIVATE KEY\n")
	dir := filepath.Join(top, "checkout")
	symlink(t, "../id_rsa", filepath.Join(dir, "motd"))
	writeFile(t, filepath.Join(dir, "main.hcl"), `
image "a" {
  artifact "motd" {
    source = "file:motd"
    dest   = "/etc/motd"
  }
}
`)
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	lock, _, diags := New(Options{Dir: dir}).Lock(context.Background(), cfg, nil, false)
	if !diags.HasErrors() {
		t.Fatalf("locked a link out of the configuration directory: %+v", lock.Images["a"].Inputs)
	}
	d := diags[0]
	if d.Subject == nil || filepath.Base(d.Subject.Filename) != "main.hcl" || d.Subject.Start.Line != 4 {
		t.Errorf("diagnostic at %v, want main.hcl:4", d.Subject)
	}
	if !strings.Contains(d.Detail, filepath.Join(dir, "motd")) || !strings.Contains(d.Detail, "leads outside the configuration directory") || strings.Contains(d.Detail, "main.hcl:4") {
		t.Errorf("detail %q: want the path and the reason, without repeating the position", d.Detail)
	}
}
