package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/image"
)

// TestBootFiles: a built image's three outputs, its manifest's platform
// and kernel parameters are what the machine boots; an image missing an
// output or with an unreadable manifest is an error naming it.
func TestBootFiles(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, image.ManifestFile)
	write := func(platform string) {
		t.Helper()
		doc := fmt.Sprintf(`{"version": %d, "image": "box", "platform": %q, "cmdline": "root=/dev/vda  rw"}`, image.ManifestVersion, platform)
		if err := os.WriteFile(manifest, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("linux/arm64")
	img := &image.Result{Image: "box", Manifest: manifest, Outputs: map[string]image.Output{
		image.OutputKernel:    {Path: "/c/vmlinuz"},
		image.OutputInitramfs: {Path: "/c/initramfs"},
		image.OutputDisk:      {Path: "/c/root.qcow2"},
	}}
	b, err := BootFiles(img)
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "box" || b.Kernel != "/c/vmlinuz" || b.Initrd != "/c/initramfs" || b.Disk != "/c/root.qcow2" ||
		b.Platform.Architecture != "arm64" || !slices.Equal(b.Cmdline, []string{"root=/dev/vda", "rw"}) {
		t.Errorf("BootFiles = %+v", b)
	}

	write("plan9/mips")
	if _, err := BootFiles(img); err == nil || !strings.Contains(err.Error(), manifest) {
		t.Errorf("an unknown platform: %v", err)
	}
	os.Remove(manifest)
	if _, err := BootFiles(img); err == nil {
		t.Error("a missing manifest: no error")
	}
	delete(img.Outputs, image.OutputDisk)
	if _, err := BootFiles(img); err == nil || !strings.Contains(err.Error(), "image box has no disk output") {
		t.Errorf("a missing output: %v", err)
	}
	if _, err := BootFiles(nil); err == nil {
		t.Error("no image: no error")
	}
}
