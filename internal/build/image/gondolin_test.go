package image_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/gondolin"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// testGondolin exports the image built as r and checks the directory as
// Gondolin would read it.
func testGondolin(t *testing.T, w *world, img *lang.Image, li *lockfiles.Image, warm *cache.Cache, r *image.Result) {
	ctx := context.Background()
	parent := t.TempDir()
	dir := filepath.Join(parent, "assets")
	start := time.Now()
	if err := image.ExportGondolin(ctx, img, li, dir, w.options(t, warm)); err != nil {
		t.Fatal(err)
	}
	t.Logf("Gondolin export from a warm cache: %v", time.Since(start).Round(time.Millisecond))
	if err := gondolin.Verify(dir); err != nil {
		t.Error(err)
	}
	m, err := gondolin.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{
		gondolin.KernelFile:    m.Checksums.Kernel,
		gondolin.InitramfsFile: m.Checksums.Initramfs,
		gondolin.RootfsFile:    m.Checksums.Rootfs,
	}
	for file, sum := range sums {
		if got := sha256File(t, filepath.Join(dir, file)); got != "sha256:"+sum {
			t.Errorf("%s hashes to %s, the manifest says %s", file, got, sum)
		}
	}
	if want := gondolin.BuildID(m.Checksums, "x86_64"); m.BuildID != want {
		t.Errorf("buildId %s, want %s", m.BuildID, want)
	}
	if m.Version != 1 || m.Config.Arch != "x86_64" || m.BuildTime != "2023-11-14T22:13:20.000Z" {
		t.Errorf("manifest version %d arch %q buildTime %q", m.Version, m.Config.Arch, m.BuildTime)
	}
	if m.Config.Rootfs == nil || m.Config.Rootfs.Label != gondolin.RootfsLabel || m.Config.Rootfs.SizeMb != 64 {
		t.Errorf("manifest rootfs config %+v", m.Config.Rootfs)
	}
	if "sha256:"+m.Checksums.Kernel != r.Outputs[image.OutputKernel].Digest {
		t.Error("vmlinuz-virt is not the built kernel")
	}

	if lz4, err := exec.LookPath("lz4"); err != nil {
		t.Log("SKIPPING THE LZ4 CHECK: lz4 is not on PATH; install the Debian package lz4 to run it")
	} else {
		out, err := exec.Command(lz4, "-dc", filepath.Join(dir, gondolin.InitramfsFile)).Output()
		if err != nil {
			t.Fatalf("lz4 -d: %v", err)
		}
		if !bytes.Equal(out, readFile(t, r.Outputs[image.OutputInitramfs].Path)) {
			t.Error("initramfs.cpio.lz4 does not decompress to the built initramfs")
		}
	}
	rootfs := filepath.Join(dir, gondolin.RootfsFile)
	if dumpe2fs, err := exec.LookPath("dumpe2fs"); err != nil {
		t.Log("SKIPPING THE LABEL CHECK: dumpe2fs is not on PATH; install the Debian package e2fsprogs to run it")
	} else {
		out, err := exec.Command(dumpe2fs, "-h", rootfs).Output()
		if err != nil {
			t.Fatalf("dumpe2fs -h: %v", err)
		}
		if !regexpLine(string(out), "Filesystem volume name:", gondolin.RootfsLabel) {
			t.Errorf("rootfs.ext4 is not labelled %s:\n%s", gondolin.RootfsLabel, out)
		}
		checkDisk(t, rootfs, "0755", li.InputHash)
	}
	if fi, err := os.Stat(rootfs); err != nil || fi.Size() != 64<<20 || fi.Mode().Perm()&0o200 == 0 {
		t.Errorf("rootfs.ext4: %v %v, want a writable 64 MiB file", fi, err)
	}

	// From a cold cache the kernel and initramfs are made here rather
	// than taken from the cache: the same bytes either way.
	dir2 := filepath.Join(parent, "cold")
	if err := image.ExportGondolin(ctx, img, li, dir2, w.options(t, nil)); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{gondolin.KernelFile, gondolin.InitramfsFile, gondolin.RootfsFile, gondolin.ManifestFile} {
		if !bytes.Equal(readFile(t, filepath.Join(dir, f)), readFile(t, filepath.Join(dir2, f))) {
			t.Errorf("%s differs between a warm and a cold export", f)
		}
	}

	// Exporting again replaces the directory and leaves nothing beside it.
	if err := os.WriteFile(filepath.Join(dir, "stale"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := image.ExportGondolin(ctx, img, li, dir, w.options(t, warm)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "stale")); err == nil {
		t.Error("the second export kept a file of the first directory")
	}
	entries, _ := os.ReadDir(parent)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "assets cold" {
		t.Errorf("beside the exports: %v", names)
	}

	// A directory that is not an export is never replaced.
	other := filepath.Join(parent, "other")
	writeFile(t, filepath.Join(other, "notes.txt"), "mine\n")
	err = image.ExportGondolin(ctx, img, li, other, w.options(t, warm))
	if err == nil || !strings.Contains(err.Error(), "not replaced") {
		t.Errorf("export over a foreign directory: %v", err)
	}
	if got := string(readFile(t, filepath.Join(other, "notes.txt"))); got != "mine\n" {
		t.Error("the foreign directory was changed")
	}
}

// regexpLine reports whether text has a line starting with key whose
// value is want.
func regexpLine(text, key, want string) bool {
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(line, key); ok && strings.TrimSpace(v) == want {
			return true
		}
	}
	return false
}
