package sandbox

import (
	"slices"
	"strings"
	"testing"
)

// TestBootFiles: an image's three outputs, its platform and kernel
// parameters are what the machine boots; an image missing an output, or
// with no platform or an unknown one, is an error naming it.
func TestBootFiles(t *testing.T) {
	img := &Image{Image: "box", Platform: "linux/arm64", Cmdline: "root=/dev/vda  rw", Outputs: map[string]ImageOutput{
		OutputKernel:    {Path: "/c/vmlinuz"},
		OutputInitramfs: {Path: "/c/initramfs"},
		OutputDisk:      {Path: "/c/root.qcow2"},
	}}
	b, err := BootFiles(img)
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "box" || b.Kernel != "/c/vmlinuz" || b.Initrd != "/c/initramfs" || b.Disk != "/c/root.qcow2" ||
		b.Platform.Architecture != "arm64" || !slices.Equal(b.Cmdline, []string{"root=/dev/vda", "rw"}) {
		t.Errorf("BootFiles = %+v", b)
	}

	img.Platform = "plan9/mips"
	if _, err := BootFiles(img); err == nil || !strings.Contains(err.Error(), "image box") {
		t.Errorf("an unknown platform: %v", err)
	}
	img.Platform = ""
	if _, err := BootFiles(img); err == nil || !strings.Contains(err.Error(), "no platform") {
		t.Errorf("no platform (an older spec): %v", err)
	}
	img.Platform = "linux/amd64"
	delete(img.Outputs, OutputDisk)
	if _, err := BootFiles(img); err == nil || !strings.Contains(err.Error(), "image box has no disk output") {
		t.Errorf("a missing output: %v", err)
	}
	if _, err := BootFiles(nil); err == nil {
		t.Error("no image: no error")
	}
}
