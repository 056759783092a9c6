package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/sandbox"
)

// TestSandboxImage: a built image becomes the sandbox's with every field
// kept and the manifest's platform and kernel parameters added, and
// boots from its own outputs; the sandbox's output names are the
// builder's.
func TestSandboxImage(t *testing.T) {
	if sandbox.OutputKernel != image.OutputKernel || sandbox.OutputInitramfs != image.OutputInitramfs || sandbox.OutputDisk != image.OutputDisk {
		t.Fatal("the sandbox's output names are not the builder's")
	}
	dir := t.TempDir()
	manifest := filepath.Join(dir, image.ManifestFile)
	doc := fmt.Sprintf(`{"version": %d, "image": "box", "platform": "linux/arm64", "cmdline": "rw quiet"}`, image.ManifestVersion)
	if err := os.WriteFile(manifest, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	img := &image.Result{Image: "box", BuildKey: "sha256:bb", Manifest: manifest, KernelVersion: "6.1", DiskSize: 7,
		Outputs: map[string]image.Output{
			image.OutputKernel:    {Path: "/c/vmlinuz", Digest: "sha256:01", Size: 1},
			image.OutputInitramfs: {Path: "/c/initramfs"},
			image.OutputDisk:      {Path: "/c/root.qcow2"},
		}}
	si, err := SandboxImage(img)
	if err != nil {
		t.Fatal(err)
	}
	if si.Image != "box" || si.BuildKey != "sha256:bb" || si.KernelVersion != "6.1" || si.DiskSize != 7 ||
		si.Platform != "linux/arm64" || si.Cmdline != "rw quiet" || si.Outputs[image.OutputKernel] != (sandbox.ImageOutput{Path: "/c/vmlinuz", Digest: "sha256:01", Size: 1}) {
		t.Errorf("SandboxImage = %+v", si)
	}
	b, err := BootFiles(img)
	if err != nil {
		t.Fatal(err)
	}
	if b.Kernel != "/c/vmlinuz" || b.Disk != "/c/root.qcow2" || b.Platform.Architecture != "arm64" || !slices.Equal(b.Cmdline, []string{"rw", "quiet"}) {
		t.Errorf("BootFiles = %+v", b)
	}
	os.Remove(manifest)
	if _, err := SandboxImage(img); err == nil {
		t.Error("an image without its manifest: no error")
	}
}
