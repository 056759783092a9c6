package initramfs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/archive/archivetest"
	"github.com/sbx-dev/sbx/internal/build/cpio"
	"github.com/sbx-dev/sbx/internal/build/initramfs"
	"github.com/sbx-dev/sbx/internal/build/kernel"
	"github.com/sbx-dev/sbx/internal/build/kernel/kerneltest"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
)

const epoch = 1700000000

// elfExec returns a minimal x86-64 ELF executable: a header and one
// program header, PT_INTERP as well when dynamic.
func elfExec(t *testing.T, dynamic bool) []byte {
	t.Helper()
	var progs []elf.Prog64
	progs = append(progs, elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Vaddr: 0x400000, Paddr: 0x400000, Filesz: 0x100, Memsz: 0x100, Align: 0x1000})
	if dynamic {
		progs = append(progs, elf.Prog64{Type: uint32(elf.PT_INTERP), Flags: uint32(elf.PF_R), Off: 0xb0, Filesz: 28, Memsz: 28, Align: 1})
	}
	hdr := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Entry: 0x400000, Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: uint16(len(progs)),
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, hdr)
	binary.Write(&b, binary.LittleEndian, progs)
	b.Write(make([]byte, 0x100-b.Len()))
	return b.Bytes()
}

type entry struct {
	mode, nlink, mtime, rdevMajor, rdevMinor uint32
	data                                     string
}

// parse reads a newc archive into entries by name, and their order.
func parse(t *testing.T, b []byte) (map[string]entry, []string) {
	t.Helper()
	out := map[string]entry{}
	var order []string
	for p := 0; ; {
		if len(b)-p < 110 || string(b[p:p+6]) != "070701" {
			t.Fatalf("no newc header at %d", p)
		}
		var v [13]uint32
		for i := range v {
			x, err := strconv.ParseUint(string(b[p+6+8*i:p+14+8*i]), 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			v[i] = uint32(x)
		}
		nameEnd := p + 110 + int(v[11])
		name := string(b[p+110 : nameEnd-1])
		data := (nameEnd + 3) &^ 3
		end := data + int(v[6])
		p = (end + 3) &^ 3
		if name == "TRAILER!!!" {
			return out, order
		}
		out[name] = entry{mode: v[1], nlink: v[4], mtime: v[5], rdevMajor: v[9], rdevMinor: v[10], data: string(b[data:end])}
		order = append(order, name)
	}
}

func write(t *testing.T, opts initramfs.Options) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := initramfs.Write(context.Background(), &buf, opts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sampleOptions(t *testing.T) initramfs.Options {
	return initramfs.Options{
		Agent:         elfExec(t, false),
		KernelVersion: "6.1.0-test-amd64",
		Modules: []initramfs.Module{
			{Name: "virtio_pci", File: "kernel/drivers/virtio/virtio_pci.ko", Data: []byte("\x7fELF pci")},
			{Name: "virtio_blk", File: "kernel/drivers/block/virtio_blk.ko", Data: []byte("\x7fELF blk")},
		},
		Epoch: epoch,
		Files: []cpio.File{
			{Entry: cpio.Entry{Name: "etc/motd", Mode: cpio.TypeRegular | 0o644, Size: 3}, Open: cpio.Bytes([]byte("hi\n"))},
			{Entry: cpio.Entry{Name: "tmp/x", Mode: cpio.TypeRegular | 0o600, Size: 0}, Open: cpio.Bytes(nil)},
		},
	}
}

func TestWrite(t *testing.T) {
	opts := sampleOptions(t)
	entries, order := parse(t, write(t, opts))
	const modDir = "lib/modules/6.1.0-test-amd64/"
	want := map[string]entry{
		"init":        {mode: cpio.TypeRegular | 0o755, data: string(opts.Agent)},
		"dev":         {mode: cpio.TypeDir | 0o755},
		"dev/console": {mode: cpio.TypeChar | 0o600, rdevMajor: 5, rdevMinor: 1},
		"dev/null":    {mode: cpio.TypeChar | 0o666, rdevMajor: 1, rdevMinor: 3},
		"proc":        {mode: cpio.TypeDir | 0o555},
		"sys":         {mode: cpio.TypeDir | 0o555},
		"run":         {mode: cpio.TypeDir | 0o755},
		"tmp":         {mode: cpio.TypeDir | 0o1777},
		"tmp/x":       {mode: cpio.TypeRegular | 0o600},
		"sysroot":     {mode: cpio.TypeDir | 0o755},
		"etc":         {mode: cpio.TypeDir | 0o755},
		"etc/motd":    {mode: cpio.TypeRegular | 0o644, data: "hi\n"},
		"lib":         {mode: cpio.TypeDir | 0o755},
		"lib/sbx":     {mode: cpio.TypeDir | 0o755},
		"lib/sbx/modules.list": {mode: cpio.TypeRegular | 0o644, data: "# sbx guest kernel modules, loaded in this order: NAME PATH\n" +
			"virtio_pci " + modDir + "kernel/drivers/virtio/virtio_pci.ko\n" +
			"virtio_blk " + modDir + "kernel/drivers/block/virtio_blk.ko\n"},
		"lib/modules":                                  {mode: cpio.TypeDir | 0o755},
		"lib/modules/6.1.0-test-amd64":                 {mode: cpio.TypeDir | 0o755},
		modDir + "kernel":                              {mode: cpio.TypeDir | 0o755},
		modDir + "kernel/drivers":                      {mode: cpio.TypeDir | 0o755},
		modDir + "kernel/drivers/block":                {mode: cpio.TypeDir | 0o755},
		modDir + "kernel/drivers/block/virtio_blk.ko":  {mode: cpio.TypeRegular | 0o644, data: "\x7fELF blk"},
		modDir + "kernel/drivers/virtio":               {mode: cpio.TypeDir | 0o755},
		modDir + "kernel/drivers/virtio/virtio_pci.ko": {mode: cpio.TypeRegular | 0o644, data: "\x7fELF pci"},
	}
	for name, w := range want {
		got, ok := entries[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if got.mode != w.mode || got.data != w.data || got.rdevMajor != w.rdevMajor || got.rdevMinor != w.rdevMinor {
			t.Errorf("%s: mode %o data %q dev %d:%d; want mode %o data %q dev %d:%d",
				name, got.mode, got.data, got.rdevMajor, got.rdevMinor, w.mode, w.data, w.rdevMajor, w.rdevMinor)
		}
		if got.mtime != epoch {
			t.Errorf("%s: mtime %d, want the epoch %d", name, got.mtime, epoch)
		}
	}
	for _, name := range order {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected entry %s", name)
		}
	}
	// The agent reads the manifest with the same parser.
	mods, err := bootproto.ParseModuleList(strings.NewReader(entries[bootproto.ModuleListPath].data), "modules.list")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		if _, ok := entries[m.File]; !ok {
			t.Errorf("manifest names %s, which the archive lacks", m.File)
		}
	}

	// Without modules there is no manifest and no modules directory.
	opts.Modules, opts.KernelVersion = nil, ""
	entries, _ = parse(t, write(t, opts))
	if _, ok := entries[bootproto.ModuleListPath]; ok {
		t.Error("a manifest without modules")
	}
	if _, ok := entries["lib/modules"]; ok {
		t.Error("a modules directory without modules")
	}
}

func TestReproducible(t *testing.T) {
	first := write(t, sampleOptions(t))
	if again := write(t, sampleOptions(t)); !bytes.Equal(first, again) {
		t.Fatalf("two writes differ: sha256 %x vs %x", sha256.Sum256(first), sha256.Sum256(again))
	}
	// Extra files in another order: the same archive.
	opts := sampleOptions(t)
	opts.Files[0], opts.Files[1] = opts.Files[1], opts.Files[0]
	if got := write(t, opts); !bytes.Equal(first, got) {
		t.Error("the order of extra files changed the archive")
	}
	// Module order is load order: it changes the manifest.
	opts = sampleOptions(t)
	opts.Modules[0], opts.Modules[1] = opts.Modules[1], opts.Modules[0]
	if got := write(t, opts); bytes.Equal(first, got) {
		t.Error("another load order gave the same archive")
	}
	opts = sampleOptions(t)
	opts.Epoch++
	if got := write(t, opts); bytes.Equal(first, got) {
		t.Error("another epoch gave the same archive")
	}
	// The agent from a file is the same as from bytes.
	opts = sampleOptions(t)
	opts.AgentFile = filepath.Join(t.TempDir(), "sbx-guest")
	if err := os.WriteFile(opts.AgentFile, opts.Agent, 0o755); err != nil {
		t.Fatal(err)
	}
	opts.Agent = nil
	if got := write(t, opts); !bytes.Equal(first, got) {
		t.Error("AgentFile gave another archive than Agent")
	}
}

func TestGNUCpio(t *testing.T) {
	tool, err := exec.LookPath("cpio")
	if err != nil {
		t.Skip("SKIPPING GNU CPIO CROSS-CHECK: cpio is not on PATH; install the Debian package cpio to run it")
	}
	archive := write(t, sampleOptions(t))
	cmd := exec.Command(tool, "-t", "-v", "--quiet")
	cmd.Stdin = bytes.NewReader(archive)
	cmd.Env = append(os.Environ(), "TZ=UTC", "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cpio -tv: %v", err)
	}
	listing := string(out)
	for _, line := range []string{
		"-rwxr-xr-x   1 root     root          256 Nov 14  2023 init",
		"crw-------   1 root     root       5,   1 Nov 14  2023 dev/console",
		"crw-rw-rw-   1 root     root       1,   3 Nov 14  2023 dev/null",
		"drwxrwxrwt   2 root     root            0 Nov 14  2023 tmp",
		"dr-xr-xr-x   2 root     root            0 Nov 14  2023 proc",
	} {
		if !strings.Contains(listing, line+"\n") {
			t.Errorf("cpio -tv lacks %q:\n%s", line, listing)
		}
	}
}

func TestWriteErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*initramfs.Options)
		want   string
	}{
		{"no agent", func(o *initramfs.Options) { o.Agent = nil }, "no guest agent given"},
		{"both", func(o *initramfs.Options) { o.AgentFile = "x" }, "both Agent and AgentFile are set"},
		{"agent file missing", func(o *initramfs.Options) { o.Agent, o.AgentFile = nil, "/nonexistent/sbx-guest" }, "reading the guest agent: open /nonexistent/sbx-guest"},
		{"script agent", func(o *initramfs.Options) { o.Agent = []byte("#!/bin/sh\n") }, "is not an ELF executable"},
		{"dynamic agent", func(o *initramfs.Options) { o.Agent = elfExec(t, true) }, "is dynamically linked"},
		{"no kernel version", func(o *initramfs.Options) { o.KernelVersion = "" }, `kernel version "" cannot name a modules directory`},
		{"kernel version climbs", func(o *initramfs.Options) { o.KernelVersion = ".." }, "cannot name a modules directory"},
		{"module path climbs", func(o *initramfs.Options) { o.Modules[0].File = "../../etc/passwd" }, `module virtio_pci: file "../../etc/passwd" must be a clean path`},
		{"compressed module", func(o *initramfs.Options) { o.Modules[1].Data = []byte("\xfd7zXZ") }, "module virtio_blk (kernel/drivers/block/virtio_blk.ko) is not an uncompressed ELF object"},
		{"module name", func(o *initramfs.Options) { o.Modules[1].Name = "a b" }, "has a space or slash"},
		{"extra replaces init", func(o *initramfs.Options) {
			o.Files = append(o.Files, cpio.File{Entry: cpio.Entry{Name: "/init", Mode: cpio.TypeRegular | 0o755}})
		}, "extra file init would replace what the initramfs needs there"},
		{"extra replaces a dir", func(o *initramfs.Options) {
			o.Files = append(o.Files, cpio.File{Entry: cpio.Entry{Name: "proc", Mode: cpio.TypeDir | 0o700}})
		}, "extra file proc would replace"},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := sampleOptions(t)
			c.change(&opts)
			var buf bytes.Buffer
			err := initramfs.Write(context.Background(), &buf, opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// KernelModules on a kernel package made here: dependencies first,
// compressed modules decompressed and renamed.
func TestKernelModules(t *testing.T) {
	const kver = "6.1.0-synth-amd64"
	objs := map[string][]byte{
		"ext4":    kerneltest.ModuleObject(t, "ext4 code", "name=ext4", "depends=jbd2,mbcache", "alias=fs-ext4"),
		"jbd2":    kerneltest.ModuleObject(t, "jbd2 code", "name=jbd2", "depends="),
		"mbcache": kerneltest.ModuleObject(t, "mbcache code", "name=mbcache", "depends="),
	}
	dir := "./lib/modules/" + kver + "/kernel/fs/"
	deb := archivetest.Deb(t, "Package: linux-image-"+kver+"\nVersion: 1\n", archive.Xz,
		archivetest.Entry{Name: "./boot/vmlinuz-" + kver, Body: "bzImage"},
		archivetest.Entry{Name: dir + "ext4/ext4.ko.xz", Body: string(archivetest.Compress(t, archive.Xz, objs["ext4"]))},
		archivetest.Entry{Name: dir + "jbd2/jbd2.ko.zst", Body: string(archivetest.Compress(t, archive.Zstd, objs["jbd2"]))},
		archivetest.Entry{Name: dir + "mbcache.ko", Body: string(objs["mbcache"])},
	)
	path := filepath.Join(t.TempDir(), "k.deb")
	if err := os.WriteFile(path, deb, 0o644); err != nil {
		t.Fatal(err)
	}
	k, err := kernel.Load(context.Background(), path, kernel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mods, err := initramfs.KernelModules(context.Background(), k, []string{"fs-ext4"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range mods {
		got = append(got, m.Name+" "+m.File)
		if !bytes.Equal(m.Data, objs[m.Name]) {
			t.Errorf("%s: data is not the decompressed object", m.Name)
		}
	}
	want := []string{"jbd2 kernel/fs/jbd2/jbd2.ko", "mbcache kernel/fs/mbcache.ko", "ext4 kernel/fs/ext4/ext4.ko"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("KernelModules = %q, want %q", got, want)
	}
	if _, err := initramfs.KernelModules(context.Background(), k, []string{"btrfs"}); err == nil || !strings.Contains(err.Error(), "btrfs") {
		t.Errorf("an unknown module: %v", err)
	}
	// And they go into an initramfs.
	entries, _ := parse(t, write(t, initramfs.Options{Agent: elfExec(t, false), KernelVersion: k.Version, Modules: mods, Epoch: epoch}))
	if e, ok := entries["lib/modules/"+kver+"/kernel/fs/ext4/ext4.ko"]; !ok || e.data != string(objs["ext4"]) {
		t.Error("ext4.ko is not in the initramfs, decompressed")
	}
}
