package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/lang"
)

type fixedVersions map[string]string

func (f fixedVersions) Candidate(pkg string) (string, error) { return f[pkg], nil }
func (f fixedVersions) Kernel() (string, string, error) {
	return "linux-image-6.1.0-57-amd64", "6.1.192-3", nil
}

// TestSpec checks that the spec the benchmark writes is valid and holds
// every package at the version given, the Codex binary and the kernel.
func TestSpec(t *testing.T) {
	vs := fixedVersions{}
	for i, p := range Packages {
		vs[p] = fmt.Sprintf("1:%d.0-1+deb12u1", i+1)
	}
	dir := t.TempDir()
	b := &bench{codex: "0.171.0"}
	if err := b.writeSpec(dir, vs); err != nil {
		t.Fatal(err)
	}
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatalf("the spec does not load: %s", diags.Error())
	}
	img := cfg.Images["bench"]
	if img == nil {
		t.Fatalf("no image bench in %v", cfg.Images)
	}
	if img.Size != ImageSize {
		t.Errorf("size %d, want %d", img.Size, ImageSize)
	}
	if img.Kernel == nil || img.Kernel.Source.Raw != "deb:linux-image-6.1.0-57-amd64=6.1.192-3" {
		t.Errorf("kernel %+v", img.Kernel)
	}
	sources := map[string]bool{}
	for _, a := range img.Artifacts {
		sources[a.Source.Raw] = true
	}
	for _, p := range Packages {
		if src := "deb:" + p + "=" + vs[p]; !sources[src] {
			t.Errorf("no artifact with source %s", src)
		}
	}
	if !sources["npm:@openai/codex@0.171.0-linux-x64"] {
		t.Errorf("no Codex artifact among %v", sources)
	}
	if len(img.Artifacts) != len(Packages)+1 {
		t.Errorf("%d artifacts, want %d", len(img.Artifacts), len(Packages)+1)
	}
}

// TestDisk runs the measured sbx disk path on a small tree and checks the
// result with qemu-img and e2fsck.
func TestDisk(t *testing.T) {
	for _, tool := range []string{"qemu-img", "e2fsck"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED: %s is not on PATH (Debian packages qemu-utils, e2fsprogs)", tool)
		}
	}
	dir := t.TempDir()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range []struct{ name, body string }{{"etc/", ""}, {"etc/motd", "hello\n"}, {"bin/", ""}, {"bin/tool", strings.Repeat("x", 100000)}} {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	in, out := filepath.Join(dir, "tree.tar"), filepath.Join(dir, "disk.qcow2")
	if err := os.WriteFile(in, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeDisk([]string{"67108864", in, out}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(out + ".ext4"); !os.IsNotExist(err) {
		t.Errorf("the raw image was left behind: %v", err)
	}
	raw := filepath.Join(dir, "check.raw")
	if b, err := exec.Command("qemu-img", "convert", "-f", "qcow2", "-O", "raw", out, raw).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v\n%s", err, b)
	}
	if fi, err := os.Stat(raw); err != nil || fi.Size() != 64<<20 {
		t.Fatalf("raw image: %v, %v", fi, err)
	}
	if b, err := exec.Command("e2fsck", "-fn", raw).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck: %v\n%s", err, b)
	}
	if err := writeDisk([]string{"64M", in, out}); err == nil {
		t.Error("a size that is not a number was accepted")
	}
}
