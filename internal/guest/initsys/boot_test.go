package initsys_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/ext4"
	"github.com/sbx-dev/sbx/internal/guest/initsys"
	"github.com/sbx-dev/sbx/internal/guest/initsys/initsystest"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
)

func newBoot(t *testing.T, files map[string]string) (*initsys.Boot, *initsystest.Recorder, *bytes.Buffer) {
	t.Helper()
	root := initsystest.MakeRoot(t, files)
	rec := &initsystest.Recorder{Root: root}
	var console bytes.Buffer
	return &initsys.Boot{Root: root, Sys: rec, Console: &console, Poll: time.Millisecond}, rec, &console
}

func TestMountKernelFS(t *testing.T) {
	b, rec, _ := newBoot(t, map[string]string{"proc/": ""})
	rec.Fail = func(call string) error {
		if strings.HasPrefix(call, "mount sysfs") {
			return syscall.EBUSY // already mounted: left as it is
		}
		return nil
	}
	if err := b.MountKernelFS(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"mount proc /proc proc nosuid,nodev,noexec",
		"mount sysfs /sys sysfs nosuid,nodev,noexec -> device or resource busy",
		"mount devtmpfs /dev devtmpfs nosuid mode=0755",
		"mount tmpfs /run tmpfs nosuid,nodev mode=0755",
	}
	if got := rec.Calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, d := range []string{"proc", "sys", "dev", "run"} {
		if fi, err := os.Stat(filepath.Join(b.Root, d)); err != nil || !fi.IsDir() {
			t.Errorf("mount point /%s not made: %v", d, err)
		}
	}

	b, rec, _ = newBoot(t, nil)
	rec.Fail = func(call string) error {
		if strings.HasPrefix(call, "mount devtmpfs") {
			return syscall.ENODEV
		}
		return nil
	}
	if err := b.MountKernelFS(); err == nil || err.Error() != "mounting devtmpfs on /dev: no such device" {
		t.Errorf("got %v, want the devtmpfs mount to fail", err)
	}
}

func TestReadConfig(t *testing.T) {
	b, _, _ := newBoot(t, map[string]string{"proc/cmdline": "console=ttyS0 sbx.rootwait=2s\n"})
	c, err := b.ReadConfig()
	if err != nil || c.RootWait != 2*time.Second || c.Root != "/dev/vda" {
		t.Errorf("ReadConfig = %+v, %v", c, err)
	}
	b, _, _ = newBoot(t, map[string]string{"proc/cmdline": "sbx.mode=nope\n"})
	if _, err := b.ReadConfig(); err == nil || !strings.HasPrefix(err.Error(), "/proc/cmdline: kernel parameter sbx.mode: unknown mode") {
		t.Errorf("got %v", err)
	}
	b, _, _ = newBoot(t, nil)
	if _, err := b.ReadConfig(); err == nil || !strings.Contains(err.Error(), "reading the kernel command line") {
		t.Errorf("got %v", err)
	}
}

func TestLoadModules(t *testing.T) {
	const dir = "lib/modules/6.1.0-test/kernel/"
	files := map[string]string{
		bootproto.ModuleListPath: "# header\ncrc32c_generic " + dir + "crypto/crc32c_generic.ko\n" +
			"crc32c_intel " + dir + "arch/crc32c-intel.ko\nvirtio_blk " + dir + "drivers/virtio_blk.ko\n",
		dir + "crypto/crc32c_generic.ko": "\x7fELF1",
		dir + "arch/crc32c-intel.ko":     "\x7fELF2",
		dir + "drivers/virtio_blk.ko":    "\x7fELF3",
	}
	b, rec, console := newBoot(t, files)
	rec.Fail = func(call string) error {
		switch {
		case strings.Contains(call, "crc32c_generic"):
			return syscall.EEXIST // built in or already loaded: fine
		case strings.Contains(call, "crc32c-intel"):
			return syscall.ENODEV // the CPU lacks the instructions
		}
		return nil
	}
	n, err := b.LoadModules()
	if err != nil || n != 2 {
		t.Errorf("LoadModules = %d, %v; want 2 loaded", n, err)
	}
	want := []string{
		"load /" + dir + "crypto/crc32c_generic.ko -> file exists",
		"load /" + dir + "arch/crc32c-intel.ko -> no such device",
		"load /" + dir + "drivers/virtio_blk.ko",
	}
	if got := rec.Calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantWarn := "sbx-guest: warning: loading module crc32c_intel (/" + dir + "arch/crc32c-intel.ko): no such device\n"
	if console.String() != wantWarn {
		t.Errorf("console %q, want %q", console.String(), wantWarn)
	}
	// The failed module is named when the disk does not come.
	err = b.WaitDevice(context.Background(), "/dev/vda", 10*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "modules that failed to load: crc32c_intel: no such device") {
		t.Errorf("WaitDevice = %v, want the failed module named", err)
	}

	// No manifest: a kernel with everything built in.
	b, rec, _ = newBoot(t, nil)
	if n, err := b.LoadModules(); n != 0 || err != nil || len(rec.Calls()) != 0 {
		t.Errorf("without a manifest: %d, %v, calls %q", n, err, rec.Calls())
	}
	// A manifest naming a missing file is an error.
	b, _, _ = newBoot(t, map[string]string{bootproto.ModuleListPath: "gone lib/modules/x/gone.ko\n"})
	if _, err := b.LoadModules(); err == nil || !strings.Contains(err.Error(), "/lib/sbx/modules.list lists module gone: open") {
		t.Errorf("got %v", err)
	}
	b, _, _ = newBoot(t, map[string]string{bootproto.ModuleListPath: "bad\n"})
	if _, err := b.LoadModules(); err == nil || !strings.Contains(err.Error(), "/lib/sbx/modules.list:1: want NAME PATH") {
		t.Errorf("got %v", err)
	}
}

func TestWaitDevice(t *testing.T) {
	// The block device shows in sysfs before its node appears in /dev:
	// WaitDevice must wait for both.
	b, _, _ := newBoot(t, map[string]string{"sys/class/block/vda/": "", "dev/": ""})
	if err := b.WaitDevice(context.Background(), "/dev/vda", 30*time.Millisecond); err == nil {
		t.Fatal("WaitDevice returned with the sysfs entry alone, before the device node existed")
	}

	b, _, _ = newBoot(t, map[string]string{"sys/class/block/": "", "dev/": ""})
	go func() {
		time.Sleep(30 * time.Millisecond)
		os.Mkdir(filepath.Join(b.Root, "sys/class/block/vda"), 0o755)
		time.Sleep(30 * time.Millisecond)
		os.WriteFile(filepath.Join(b.Root, "dev/vda"), nil, 0o644)
	}()
	if err := b.WaitDevice(context.Background(), "/dev/vda", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b.Root, "dev/vda")); err != nil {
		t.Errorf("returned before the device node appeared: %v", err)
	}

	b, _, _ = newBoot(t, map[string]string{"sys/class/block/sr0/": "", "sys/class/block/vdb/": "", "dev/vdb": ""})
	start := time.Now()
	err := b.WaitDevice(context.Background(), "/dev/vda", 50*time.Millisecond)
	if err == nil || err.Error() != "root disk /dev/vda did not appear within 50ms (block devices: sr0, vdb)" {
		t.Errorf("got %v", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("gave up after %v, before its 50ms timeout", d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	b, _, _ = newBoot(t, nil)
	err = b.WaitDevice(ctx, "/dev/vda", time.Hour)
	if err == nil || err.Error() != "stopped waiting for root disk /dev/vda (there are no block devices)" {
		t.Errorf("got %v", err)
	}
}

// ext4Image builds a real ext4 image with builders/ext4.
func ext4Image(t *testing.T) []byte {
	t.Helper()
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	tw.WriteHeader(&tar.Header{Name: "etc/hostname", Mode: 0o644, Size: 4, Typeflag: tar.TypeReg})
	tw.Write([]byte("box\n"))
	tw.Close()
	f, err := os.Create(filepath.Join(t.TempDir(), "img"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := ext4.Build(context.Background(), f, &tb, ext4.Options{Size: 8 << 20, Seed: []byte("t"), Epoch: 1700000000}); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestCheckFS(t *testing.T) {
	b, _, _ := newBoot(t, map[string]string{
		"dev/vda": string(ext4Image(t)),
		"dev/vdb": strings.Repeat("\x00", 4096),
		"dev/vdc": "tiny",
	})
	if err := b.CheckFS("/dev/vda", "ext4"); err != nil {
		t.Errorf("a real ext4 image: %v", err)
	}
	if err := b.CheckFS("/dev/vdb", "ext4"); err == nil ||
		err.Error() != "root disk /dev/vdb is not an ext4 file system: no ext superblock magic at byte 1080 (found 0x0000, want 0xef53)" {
		t.Errorf("zeros: %v", err)
	}
	if err := b.CheckFS("/dev/vdc", "ext4"); err == nil || err.Error() != "root disk /dev/vdc is too small to hold an ext4 file system" {
		t.Errorf("tiny: %v", err)
	}
	if err := b.CheckFS("/dev/vdb", "xfs"); err != nil {
		t.Errorf("a type it does not know is not checked: %v", err)
	}
	if err := b.CheckFS("/dev/missing", "ext4"); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}

func TestMountAndSwitchRoot(t *testing.T) {
	b, rec, console := newBoot(t, map[string]string{"sysroot/etc/hostname": "\n  disk-name  \nsecond\n", "sysroot/proc/": ""})
	cfg := bootproto.DefaultConfig()
	if err := b.MountRoot(cfg); err != nil {
		t.Fatal(err)
	}
	if h := b.Hostname(cfg); h != "disk-name" {
		t.Errorf("Hostname = %q, want the root's disk-name", h)
	}
	cfg.Hostname = "cmdline-name"
	if h := b.Hostname(cfg); h != "cmdline-name" {
		t.Errorf("Hostname = %q, want the command line's", h)
	}
	if err := b.SwitchRoot(); err != nil {
		t.Fatal(err)
	}
	if err := b.SetHostname("disk-name"); err != nil {
		t.Fatal(err)
	}
	if err := b.PowerOff(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"mount /dev/vda /sysroot ext4 -",
		"mount /proc /sysroot/proc - move",
		"mount /sys /sysroot/sys - move",
		"mount /dev /sysroot/dev - move",
		"mount /run /sysroot/run - move",
		"switchroot /sysroot",
		"sethostname disk-name",
		"sync",
		"mount - / - ro,remount",
		"sync",
		"poweroff",
	}
	if got := rec.Calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, d := range []string{"proc", "sys", "dev", "run"} {
		if fi, err := os.Stat(filepath.Join(b.Root, "sysroot", d)); err != nil || !fi.IsDir() {
			t.Errorf("mount point /%s not made on the root disk: %v", d, err)
		}
	}
	if console.Len() != 0 {
		t.Errorf("console: %q", console.String())
	}
}

func TestHostnameFallbacks(t *testing.T) {
	cfg := bootproto.DefaultConfig()
	b, _, console := newBoot(t, nil)
	if h := b.Hostname(cfg); h != bootproto.DefaultHostname || console.Len() != 0 {
		t.Errorf("no /etc/hostname: %q, console %q", h, console.String())
	}
	b, _, console = newBoot(t, map[string]string{"sysroot/etc/hostname": "not valid!\n"})
	if h := b.Hostname(cfg); h != bootproto.DefaultHostname {
		t.Errorf("invalid /etc/hostname: %q", h)
	}
	if !strings.HasPrefix(console.String(), `sbx-guest: warning: /etc/hostname of the root disk: host name "not valid!" has ' '`) {
		t.Errorf("console %q", console.String())
	}
}

func TestPowerOffBeforeSwitch(t *testing.T) {
	// Failing after the root disk is mounted: it is unmounted, not
	// remounted.
	b, rec, console := newBoot(t, nil)
	if err := b.MountRoot(bootproto.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	rec.Fail = func(call string) error {
		switch call {
		case "umount /sysroot":
			return syscall.EBUSY
		case "poweroff":
			return syscall.EPERM
		}
		return nil
	}
	err := b.PowerOff()
	if err == nil || err.Error() != "powering off: operation not permitted" {
		t.Errorf("got %v", err)
	}
	want := []string{"mount /dev/vda /sysroot ext4 -", "sync", "umount /sysroot -> device or resource busy", "sync", "poweroff -> operation not permitted"}
	if got := rec.Calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls %q\nwant %q", got, want)
	}
	if console.String() != "sbx-guest: warning: unmounting /sysroot: device or resource busy\n" {
		t.Errorf("console %q", console.String())
	}
}

func TestKernelReleaseAndUptime(t *testing.T) {
	b, _, _ := newBoot(t, map[string]string{"proc/sys/kernel/osrelease": "6.1.0-57-amd64\n", "proc/uptime": "3.75 2.10\n"})
	if v, err := b.KernelRelease(); err != nil || v != "6.1.0-57-amd64" {
		t.Errorf("KernelRelease = %q, %v", v, err)
	}
	if d, err := b.Uptime(); err != nil || d != 3750*time.Millisecond {
		t.Errorf("Uptime = %v, %v", d, err)
	}
	b, _, _ = newBoot(t, map[string]string{"proc/uptime": "soon\n"})
	if _, err := b.Uptime(); err == nil || err.Error() != `/proc/uptime: "soon" is not a number of seconds` {
		t.Errorf("got %v", err)
	}
}
