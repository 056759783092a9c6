package kernel_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/archive/archivetest"
	"github.com/sbx-dev/sbx/internal/build/kernel"
	"github.com/sbx-dev/sbx/internal/build/kernel/kerneltest"
)

// TestDebianKernel loads Debian's generic amd64 kernel package and checks
// that the default module set resolves with 9p's fd transport, the virtio
// devices, overlay and ext4 with its dependencies, in load order.
func TestDebianKernel(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED in -short mode: reads the 70 MB Debian kernel package")
	}
	deb := kerneltest.DebianKernelDeb(t)
	k, err := kernel.Load(context.Background(), deb, kernel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pkg, _, _ := strings.Cut(filepath.Base(deb), "_")
	if "linux-image-"+k.Version != pkg {
		t.Errorf("Version %q does not match package %s", k.Version, pkg)
	}
	// A bzImage carries "HdrS" at 0x202.
	if len(k.Image) < 1<<20 || string(k.Image[0x202:0x206]) != "HdrS" {
		t.Errorf("image %s: %d bytes, not a bzImage", k.ImageName, len(k.Image))
	}
	if len(k.Modules) < 1000 {
		t.Errorf("only %d modules", len(k.Modules))
	}

	mods, err := k.Closure(kernel.DefaultModules)
	if err != nil {
		t.Fatal(err)
	}
	got := names(mods)
	t.Logf("kernel %s: load order %s", k.Version, strings.Join(got, " "))
	pos := func(name string) int { return slices.Index(got, name) }
	for _, name := range []string{"9pnet_fd", "9pnet", "9p", "overlay", "ext4", "fuse"} {
		if pos(name) < 0 {
			t.Errorf("%s missing from the closure", name)
		}
	}
	for _, name := range []string{"virtio_blk", "virtio_net", "virtio_console", "virtio_pci", "virtio_rng"} {
		if pos(name) < 0 && !k.IsBuiltin(name) {
			t.Errorf("%s is neither in the closure nor built in", name)
		}
	}
	before := [][2]string{
		{"9pnet", "9pnet_fd"}, {"9pnet", "9p"},
		{"jbd2", "ext4"}, {"mbcache", "ext4"}, {"crc16", "ext4"}, {"crc32c_generic", "ext4"},
		{"virtio", "virtio_blk"}, {"virtio_ring", "virtio_blk"},
	}
	for _, p := range before {
		a, b := pos(p[0]), pos(p[1])
		if k.IsBuiltin(p[0]) || (a >= 0 && a < b) {
			continue
		}
		t.Errorf("%s (at %d) must come before %s (at %d)", p[0], a, p[1], b)
	}
	checkOrder(t, k, mods)

	data, err := k.ReadModules(context.Background(), mods)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		b := data[m.Name]
		if !bytes.HasPrefix(b, []byte("\x7fELF")) || int64(len(b)) != m.Size {
			t.Errorf("%s: %d bytes (Size %d), not an ELF module", m.Name, len(b), m.Size)
		}
		if !bytes.Contains(b, []byte("name="+m.Name+"\x00")) {
			t.Errorf("%s: bytes do not carry name=%s", m.Name, m.Name)
		}
	}
}

// TestDebianMetaPackage loads the meta package linux-image-amd64, which
// holds no kernel, and checks that the error names the package to use.
func TestDebianMetaPackage(t *testing.T) {
	meta := archivetest.AptDownload(t, kerneltest.MetaPackage, "")
	_, err := kernel.Load(context.Background(), meta, kernel.Options{})
	var me *kernel.MetaPackageError
	if !errors.As(err, &me) {
		t.Fatalf("Load(%s) err = %v, want a *MetaPackageError", meta, err)
	}
	if me.Package != kerneltest.MetaPackage || !strings.HasPrefix(me.Target, "linux-image-") ||
		!strings.HasSuffix(me.Target, "-amd64") || me.TargetVersion != me.Version {
		t.Errorf("MetaPackageError %+v", me)
	}
	t.Log(err)
}
