package kernel_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/archive/archivetest"
	"github.com/sbx-dev/sbx/internal/build/kernel"
	"github.com/sbx-dev/sbx/internal/build/kernel/kerneltest"
)

type E = archivetest.Entry

const kver = "6.1.0-99-amd64"

// mod is one module of the synthetic kernel.
type mod struct {
	path string // under lib/modules/kver
	info []string
	comp archive.Compression
}

// synthModules is a small kernel's module tree, in the order Debian's
// archives list it (arch and crypto before drivers and fs), with a
// dependency chain (virtio_net → net_failover → failover), a soft
// dependency on an alias with two providers (crypto-crc32c), a built-in
// dependency (crc16) and compressed files.
var synthModules = []mod{
	{"kernel/arch/x86/crypto/crc32c-intel.ko", []string{"alias=crypto-crc32c", "alias=crc32c", "depends=", "name=crc32c_intel"}, archive.None},
	{"kernel/crypto/crc32c_generic.ko", []string{"alias=crypto-crc32c", "alias=crc32c", "depends=", "name=crc32c_generic"}, archive.None},
	{"kernel/drivers/block/virtio_blk.ko.xz", []string{"depends=virtio,virtio_ring", "name=virtio_blk"}, archive.Xz},
	{"kernel/drivers/char/hw_random/virtio-rng.ko", []string{"depends=virtio,virtio_ring", "name=virtio_rng"}, archive.None},
	{"kernel/drivers/char/virtio_console.ko.zst", []string{"depends=virtio,virtio_ring", "name=virtio_console"}, archive.Zstd},
	{"kernel/drivers/net/net_failover.ko", []string{"depends=failover", "name=net_failover"}, archive.None},
	{"kernel/drivers/net/virtio_net.ko", []string{"depends=virtio_ring,virtio,net_failover", "name=virtio_net"}, archive.None},
	{"kernel/drivers/virtio/virtio.ko", []string{"depends=", "name=virtio"}, archive.None},
	{"kernel/drivers/virtio/virtio_balloon.ko", []string{"depends=virtio,virtio_ring", "name=virtio_balloon"}, archive.None},
	{"kernel/drivers/virtio/virtio_ring.ko", []string{"depends=", "name=virtio_ring"}, archive.None},
	{"kernel/fs/9p/9p.ko", []string{"alias=fs-9p", "depends=9pnet,netfs", "name=9p"}, archive.None},
	{"kernel/fs/ext4/ext4.ko", []string{"softdep=pre: crypto-crc32c", "alias=fs-ext4", "depends=jbd2,mbcache,crc16", "name=ext4"}, archive.None},
	{"kernel/fs/fuse/fuse.ko", []string{"alias=fs-fuse", "depends=", "name=fuse"}, archive.None},
	{"kernel/fs/fuse/virtiofs.ko", []string{"alias=fs-virtiofs", "depends=fuse,virtio,virtio_ring", "name=virtiofs"}, archive.None},
	{"kernel/fs/jbd2/jbd2.ko", []string{"softdep=pre: crypto-crc32c", "depends=", "name=jbd2"}, archive.None},
	{"kernel/fs/mbcache.ko", []string{"depends=", "name=mbcache"}, archive.None},
	{"kernel/fs/netfs/netfs.ko", []string{"depends=", "name=netfs"}, archive.None},
	{"kernel/fs/overlayfs/overlay.ko", []string{"alias=fs-overlay", "depends=", "name=overlay"}, archive.None},
	{"kernel/fs/broken/broken.ko", []string{"depends=ghost", "name=broken"}, archive.None},
	{"kernel/fs/cyc/cyc_a.ko", []string{"depends=cyc_b", "name=cyc_a"}, archive.None},
	{"kernel/fs/cyc/cyc_b.ko", []string{"depends=cyc_a", "name=cyc_b"}, archive.None},
	{"kernel/net/9p/9pnet.ko", []string{"depends=", "name=9pnet"}, archive.None},
	{"kernel/net/9p/9pnet_fd.ko", []string{"alias=9p-fd", "depends=9pnet", "name=9pnet_fd"}, archive.None},
	{"kernel/net/core/failover.ko", []string{"depends=", "name=failover"}, archive.None},
}

// objects returns each module's plain ELF object, by module name.
func objects(t *testing.T) map[string][]byte {
	out := map[string][]byte{}
	for _, m := range synthModules {
		name := ""
		for _, kv := range m.info {
			if v, ok := strings.CutPrefix(kv, "name="); ok {
				name = v
			}
		}
		out[name] = kerneltest.ModuleObject(t, "code of "+name, m.info...)
	}
	return out
}

// synthDeb writes a Debian kernel package for kver holding the image,
// the modules above, modules.builtin (virtio_pci and crc16 built in) and
// extra entries, and returns its path.
func synthDeb(t *testing.T, extra ...E) string {
	t.Helper()
	objs := objects(t)
	dir := "./lib/modules/" + kver + "/"
	entries := []E{
		{Name: "./"},
		{Name: "./boot/"},
		{Name: "./boot/System.map-" + kver, Body: "map"},
		{Name: "./boot/config-" + kver, Body: "CONFIG_NET_9P_FD=m\n"},
		{Name: "./boot/vmlinuz-" + kver, Body: "bzImage bytes"},
		{Name: dir},
		{Name: dir + "modules.builtin", Body: "kernel/drivers/virtio/virtio_pci.ko\nkernel/lib/crc16.ko\n"},
		{Name: dir + "modules.builtin.modinfo", Body: "virtio_pci.license=GPL\x00crc16.license=GPL\x00crc16.alias=crc-16\x00"},
		{Name: dir + "modules.order", Body: "kernel/fs/ext4/ext4.ko\n"},
	}
	for _, m := range synthModules {
		name := nameOf(m)
		entries = append(entries, E{Name: dir + m.path, Body: string(archivetest.Compress(t, m.comp, objs[name]))})
	}
	entries = append(entries, extra...)
	return writeFile(t, "linux-image-"+kver+"_6.1.999-1_amd64.deb",
		archivetest.Deb(t, "Package: linux-image-"+kver+"\nVersion: 6.1.999-1\n", archive.Xz, entries...))
}

func nameOf(m mod) string {
	for _, kv := range m.info {
		if v, ok := strings.CutPrefix(kv, "name="); ok {
			return v
		}
	}
	return ""
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func names(mods []*kernel.Module) []string {
	var out []string
	for _, m := range mods {
		out = append(out, m.Name)
	}
	return out
}

func TestLoad(t *testing.T) {
	k, err := kernel.Load(context.Background(), synthDeb(t), kernel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if k.Version != kver || k.ImageName != "boot/vmlinuz-"+kver || string(k.Image) != "bzImage bytes" ||
		k.ModulesDir != "lib/modules/"+kver {
		t.Errorf("Load = version %q image %q (%q) dir %q", k.Version, k.ImageName, k.Image, k.ModulesDir)
	}
	if len(k.Modules) != len(synthModules) {
		t.Errorf("%d modules, want %d", len(k.Modules), len(synthModules))
	}
	rng := k.Modules["virtio_rng"]
	if rng == nil || rng.Path != "kernel/drivers/char/hw_random/virtio-rng.ko" {
		t.Fatalf("virtio-rng.ko: %+v (want the name virtio_rng)", rng)
	}
	blk := k.Modules["virtio_blk"]
	if blk.Compression != archive.Xz || blk.File() != "kernel/drivers/block/virtio_blk.ko" ||
		blk.Path != "kernel/drivers/block/virtio_blk.ko.xz" {
		t.Errorf("virtio_blk: compression %q file %q path %q", blk.Compression, blk.File(), blk.Path)
	}
	if diff := cmp.Diff([]string{"virtio", "virtio_ring"}, blk.Depends); diff != "" {
		t.Errorf("virtio_blk depends (-want +got):\n%s", diff)
	}
	ext4 := k.Modules["ext4"]
	if diff := cmp.Diff([]string{"crypto-crc32c"}, ext4.SoftPre); diff != "" {
		t.Errorf("ext4 softdep pre (-want +got):\n%s", diff)
	}
	for _, b := range []string{"virtio_pci", "crc16", "crc-16"} {
		if !k.IsBuiltin(b) {
			t.Errorf("%s is not reported built in", b)
		}
	}
	if k.IsBuiltin("ext4") {
		t.Errorf("ext4 reported built in")
	}
}

func TestClosureDefault(t *testing.T) {
	k, err := kernel.Load(context.Background(), synthDeb(t), kernel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mods, err := k.Closure(kernel.DefaultModules)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		// virtio_pci is built in
		"virtio", "virtio_ring", "virtio_blk",
		"failover", "net_failover", "virtio_net",
		"virtio_console", "virtio_rng", "virtio_balloon", "overlay",
		// ext4's soft dependency on crypto-crc32c picks crc32c_generic;
		// crc16 is built in
		"crc32c_generic", "jbd2", "mbcache", "ext4",
		"9pnet", "9pnet_fd", "netfs", "9p",
		"fuse", "virtiofs",
	}
	if diff := cmp.Diff(want, names(mods)); diff != "" {
		t.Errorf("Closure(DefaultModules) (-want +got):\n%s", diff)
	}
	checkOrder(t, k, mods)

	// Reading them gives the plain objects, whatever their compression.
	data, err := k.ReadModules(context.Background(), mods)
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t)
	for _, m := range mods {
		if !bytes.Equal(data[m.Name], objs[m.Name]) {
			t.Errorf("%s: ReadModules gave %d bytes, want the %d-byte object", m.Name, len(data[m.Name]), len(objs[m.Name]))
		}
		if m.Size != int64(len(objs[m.Name])) {
			t.Errorf("%s: Size %d, want %d", m.Name, m.Size, len(objs[m.Name]))
		}
	}
}

// checkOrder checks that every module comes after its dependencies.
func checkOrder(t *testing.T, k *kernel.Kernel, mods []*kernel.Module) {
	t.Helper()
	pos := map[string]int{}
	for i, m := range mods {
		if _, dup := pos[m.Name]; dup {
			t.Errorf("%s listed twice", m.Name)
		}
		pos[m.Name] = i
	}
	for i, m := range mods {
		for _, d := range m.Depends {
			if k.IsBuiltin(d) {
				continue
			}
			j, ok := pos[d]
			if !ok || j > i {
				t.Errorf("%s (at %d) depends on %s, which is at %d (present %v)", m.Name, i, d, j, ok)
			}
		}
	}
}

func TestClosureNames(t *testing.T) {
	k, err := kernel.Load(context.Background(), synthDeb(t), kernel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		names []string
		want  []string
	}{
		{[]string{"virtio-rng"}, []string{"virtio", "virtio_ring", "virtio_rng"}},
		{[]string{"fs-9p"}, []string{"9pnet", "netfs", "9p"}},
		{[]string{"crc32c"}, []string{"crc32c_generic"}},
		{[]string{"crc32c-intel"}, []string{"crc32c_intel"}},
		{[]string{"virtio_pci", "crc16"}, nil},
		{[]string{"9pnet_fd", "9pnet"}, []string{"9pnet", "9pnet_fd"}},
	} {
		mods, err := k.Closure(tc.names)
		if err != nil {
			t.Errorf("Closure(%v): %v", tc.names, err)
			continue
		}
		if diff := cmp.Diff(tc.want, names(mods)); diff != "" {
			t.Errorf("Closure(%v) (-want +got):\n%s", tc.names, diff)
		}
	}
}

func TestClosureErrors(t *testing.T) {
	k, err := kernel.Load(context.Background(), synthDeb(t), kernel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"virtio_blkk"}, `kernel 6.1.0-99-amd64 has no module "virtio_blkk"; near: virtio_blk`},
		{[]string{"ext4", "nosuch"}, `kernel 6.1.0-99-amd64 has no module "nosuch"`},
		{[]string{"broken"}, `module broken depends on "ghost", which kernel 6.1.0-99-amd64 neither ships nor builds in`},
		{[]string{"cyc_a"}, `kernel 6.1.0-99-amd64: modules depend on each other in a cycle: cyc_a -> cyc_b -> cyc_a`},
	} {
		_, err := k.Closure(tc.names)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Closure(%v) err = %v\nwant %s", tc.names, err, tc.want)
		}
	}
	_, err = k.Closure([]string{"virtio_blkk"})
	var ue *kernel.UnknownModuleError
	if !errors.As(err, &ue) || ue.Name != "virtio_blkk" {
		t.Errorf("err %#v is not an *UnknownModuleError for virtio_blkk", err)
	}
}

// TestReadModulesOnePass checks that Load keeps every module of the
// closure of DefaultModules and Options.Modules, including those the
// archive lists before the modules needing them (crc32c_generic before
// ext4, net_failover and failover around virtio_net), so that ReadModules
// serves that closure without the archive; that it reads the archive
// again for anything else; and that the spill file is gone when Load
// returns.
func TestReadModulesOnePass(t *testing.T) {
	path := synthDeb(t)
	tmp := t.TempDir()
	k, err := kernel.Load(context.Background(), path, kernel.Options{Modules: []string{"fuse"}, TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("Load left %d files in its temporary directory", len(left))
	}
	closure, err := k.Closure(append(slices.Clone(kernel.DefaultModules), "fuse"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"crc32c_generic", "failover", "net_failover", "fuse"} {
		if !slices.Contains(names(closure), want) {
			t.Fatalf("closure %v lacks %s", names(closure), want)
		}
	}
	// crc32c_intel is in no closure Load was told of.
	other, err := k.Closure([]string{"crc32c_intel"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.ReadModules(context.Background(), other); err != nil {
		t.Fatalf("with the archive: %v", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	data, err := k.ReadModules(context.Background(), closure)
	if err != nil {
		t.Fatalf("the closure needs the archive again: %v", err)
	}
	objs := objects(t)
	for _, m := range closure {
		if !bytes.Equal(data[m.Name], objs[m.Name]) {
			t.Errorf("%s: %d bytes differ from the module's object (%d bytes)", m.Name, len(data[m.Name]), len(objs[m.Name]))
		}
	}
	if _, err := k.ReadModules(context.Background(), other); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("reading crc32c_intel without the archive: err = %v, want one naming %s", err, path)
	}
}

// TestReadModulesNoSpill checks that when Load cannot write its spill
// file it still succeeds, and ReadModules reads from the archive what
// Load passed before it knew it was needed.
func TestReadModulesNoSpill(t *testing.T) {
	path := synthDeb(t)
	k, err := kernel.Load(context.Background(), path, kernel.Options{TempDir: filepath.Join(t.TempDir(), "missing")})
	if err != nil {
		t.Fatal(err)
	}
	closure, err := k.Closure(kernel.DefaultModules)
	if err != nil {
		t.Fatal(err)
	}
	data, err := k.ReadModules(context.Background(), closure)
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t)
	for _, m := range closure {
		if !bytes.Equal(data[m.Name], objs[m.Name]) {
			t.Errorf("%s: bytes differ from the module's object", m.Name)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	// crc32c_generic precedes ext4 in the archive: without a spill file
	// Load could not keep it.
	_, err = k.ReadModules(context.Background(), closure)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("without the archive or a spill: err = %v, want one naming %s", err, path)
	}
}

func TestLoadErrors(t *testing.T) {
	obj := kerneltest.ModuleObject(t, "x", "name=x", "depends=")
	deb := func(entries ...E) string {
		return writeFile(t, "k.deb", archivetest.Deb(t, "Package: k\nVersion: 1\n", archive.Gzip, entries...))
	}
	for _, tc := range []struct {
		name string
		path string
		want string // the error after the archive's path
	}{
		{"no modules", deb(E{Name: "./boot/vmlinuz-6.1.0-1-amd64", Body: "img"}),
			" has no kernel modules (no lib/modules/VERSION/ with .ko files): a kernel source must carry its modules"},
		{"no image", deb(E{Name: "./lib/modules/6.1.0-1-amd64/kernel/x.ko", Body: string(obj)}),
			` has no kernel image matching "boot/vmlinuz-*"`},
		{"two kernels", deb(
			E{Name: "./boot/vmlinuz-a", Body: "img"},
			E{Name: "./lib/modules/a/kernel/x.ko", Body: string(obj)},
			E{Name: "./lib/modules/b/kernel/x.ko", Body: string(obj)}),
			" has modules for 2 kernels (a, b); a kernel source must hold one"},
		{"not a module", deb(
			E{Name: "./boot/vmlinuz-a", Body: "img"},
			E{Name: "./lib/modules/a/kernel/x.ko", Body: "plain text"}),
			": lib/modules/a/kernel/x.ko: not a kernel module: no ELF header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := kernel.Load(context.Background(), tc.path, kernel.Options{})
			want := "archive " + tc.path + tc.want
			if err == nil || err.Error() != want {
				t.Errorf("err = %v\nwant  %s", err, want)
			}
		})
	}

	t.Run("bare image", func(t *testing.T) {
		img := make([]byte, 4096)
		copy(img[0x202:], "HdrS")
		p := writeFile(t, "vmlinuz", img)
		_, err := kernel.Load(context.Background(), p, kernel.Options{})
		want := p + " is a bare kernel image, without the modules a guest needs; name a kernel package holding boot/vmlinuz-* and lib/modules/VERSION/ (deb:linux-image-VERSION-amd64=…)"
		if err == nil || err.Error() != want {
			t.Errorf("err = %v\nwant  %s", err, want)
		}
	})

	t.Run("two images", func(t *testing.T) {
		p := deb(E{Name: "./boot/vmlinuz-a", Body: "1"}, E{Name: "./boot/vmlinuz-a.old", Body: "2"},
			E{Name: "./lib/modules/a/kernel/x.ko", Body: string(obj)})
		_, err := kernel.Load(context.Background(), p, kernel.Options{})
		want := `kernel image pattern "boot/vmlinuz-*" matches 2 files in archive ` + p + ` (boot/vmlinuz-a, boot/vmlinuz-a.old); it must match exactly one`
		if err == nil || err.Error() != want {
			t.Errorf("err = %v\nwant  %s", err, want)
		}
		k, err := kernel.Load(context.Background(), p, kernel.Options{Image: "/boot/vmlinuz-a"})
		if err != nil || string(k.Image) != "1" {
			t.Errorf("with Image set: %v", err)
		}
	})
}

func TestLoadMetaPackage(t *testing.T) {
	control := "Package: linux-image-amd64\nVersion: 6.1.999-1\nDepends: linux-image-" + kver + " (= 6.1.999-1)\n"
	p := writeFile(t, "meta.deb", archivetest.Deb(t, control, archive.Xz,
		E{Name: "./usr/share/doc/linux-image-amd64", Type: '2', Linkname: "linux-image-" + kver}))
	_, err := kernel.Load(context.Background(), p, kernel.Options{})
	var me *kernel.MetaPackageError
	if !errors.As(err, &me) {
		t.Fatalf("err = %v, want a *MetaPackageError", err)
	}
	want := p + ` is the meta package linux-image-amd64 6.1.999-1, which holds no kernel; name the package it depends on: source = "deb:linux-image-6.1.0-99-amd64=6.1.999-1"`
	if err.Error() != want {
		t.Errorf("err = %v\nwant  %s", err, want)
	}
}

func TestFollowMeta(t *testing.T) {
	for _, tc := range []struct {
		depends      string
		pkg, version string
	}{
		{"linux-image-6.1.0-57-amd64 (= 6.1.192-3)", "linux-image-6.1.0-57-amd64", "6.1.192-3"},
		{"linux-image-6.12.48+deb13-amd64 (= 6.12.48-1)", "linux-image-6.12.48+deb13-amd64", "6.12.48-1"},
		{"kmod, linux-image-6.1.0-9-amd64", "linux-image-6.1.0-9-amd64", ""},
		{"linux-image-6.1.0-9-amd64:amd64 (>= 6.1)", "linux-image-6.1.0-9-amd64", ""},
		{"linux-image-6.1.0-9-amd64-dbg, linux-image-6.1.0-9-amd64", "linux-image-6.1.0-9-amd64", ""},
		{"kmod, linux-base (>= 4.3~)", "", ""},
		{"", "", ""},
	} {
		pkg, version, ok := kernel.FollowMeta(archive.Fields{"Package": "linux-image-amd64", "Depends": tc.depends})
		if pkg != tc.pkg || version != tc.version || ok != (tc.pkg != "") {
			t.Errorf("FollowMeta(%q) = %q, %q, %v; want %q, %q", tc.depends, pkg, version, ok, tc.pkg, tc.version)
		}
	}
}

// TestModulesDep reads an Alpine-style tree (usr/lib/modules, gzip
// compressed modules, modules.dep shipped) from a plain tar: modules.dep
// overrides the modules' own depends=.
func TestModulesDep(t *testing.T) {
	const v = "6.6.1-0-virt"
	dir := "usr/lib/modules/" + v + "/"
	a := kerneltest.ModuleObject(t, "a", "name=a", "depends=")
	b := kerneltest.ModuleObject(t, "b", "name=b", "depends=")
	c := kerneltest.ModuleObject(t, "c", "name=c", "depends=a") // modules.dep says b
	tarball := archivetest.Tar(t,
		E{Name: "boot/vmlinuz-virt", Body: "img"},
		E{Name: dir + "kernel/a.ko.gz", Body: string(archivetest.Compress(t, archive.Gzip, a))},
		E{Name: dir + "kernel/b.ko.gz", Body: string(archivetest.Compress(t, archive.Gzip, b))},
		E{Name: dir + "kernel/c.ko.gz", Body: string(archivetest.Compress(t, archive.Gzip, c))},
		E{Name: dir + "modules.dep", Body: "kernel/a.ko.gz:\nkernel/b.ko.gz:\nkernel/c.ko.gz: kernel/b.ko.gz\n"},
	)
	p := writeFile(t, "linux-virt.tar", tarball)
	k, err := kernel.Load(context.Background(), p, kernel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if k.Version != v || k.ModulesDir != "usr/lib/modules/"+v || k.ImageName != "boot/vmlinuz-virt" {
		t.Errorf("version %q dir %q image %q", k.Version, k.ModulesDir, k.ImageName)
	}
	mods, err := k.Closure([]string{"c"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b", "c"}, names(mods)); diff != "" {
		t.Errorf("Closure(c) (-want +got):\n%s", diff)
	}
	if mods[1].Compression != archive.Gzip || mods[1].File() != "kernel/c.ko" {
		t.Errorf("c: compression %q file %q", mods[1].Compression, mods[1].File())
	}
	data, err := k.ReadModules(context.Background(), mods)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data["c"], c) {
		t.Errorf("c: got %d bytes, want the %d-byte object", len(data["c"]), len(c))
	}

	bad := writeFile(t, "bad.tar", archivetest.Tar(t,
		E{Name: "boot/vmlinuz-virt", Body: "img"},
		E{Name: dir + "kernel/a.ko", Body: string(a)},
		E{Name: dir + "modules.dep", Body: "kernel/a.ko: kernel/gone.ko\n"},
	))
	_, err = kernel.Load(context.Background(), bad, kernel.Options{})
	want := "archive " + bad + ": usr/lib/modules/" + v + "/modules.dep: line 1: names kernel/gone.ko, which the archive does not hold"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant  %s", err, want)
	}
}
