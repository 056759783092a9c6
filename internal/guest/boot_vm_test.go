package guest_test

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/agentbin"
	"github.com/sbx-dev/sbx/internal/build/ext4"
	"github.com/sbx-dev/sbx/internal/build/initramfs"
	"github.com/sbx-dev/sbx/internal/build/kernel"
	"github.com/sbx-dev/sbx/internal/build/kernel/kerneltest"
	"github.com/sbx-dev/sbx/internal/machine/qemu/qemutest"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
	"github.com/sbx-dev/sbx/internal/qcow2"
	"github.com/sbx-dev/sbx/lang"
)

// The boot tests run the real agent as PID 1 of a real Debian kernel
// under QEMU (TCG: this kind of machine has a /dev/kvm that hangs
// guests), from an initramfs and a root disk the sbx builders made.

const testEpoch = 1700000000

// bootFixture is what every boot shares: the kernel and the initramfs.
type bootFixture struct {
	qemu    string
	kernel  *kernel.Kernel
	vmlinuz string
	initrd  string
	modules []initramfs.Module
}

func newBootFixture(t *testing.T) *bootFixture {
	t.Helper()
	qemu := qemutest.Require(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	agent, err := agentbin.Build(ctx, lang.Platform{OS: "linux", Architecture: "amd64"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.Load(context.Background(), kerneltest.DebianKernelDeb(t), kernel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mods, err := initramfs.KernelModules(context.Background(), k, kernel.DefaultModules)
	if err != nil {
		t.Fatal(err)
	}
	f := &bootFixture{qemu: qemu, kernel: k, modules: mods,
		vmlinuz: filepath.Join(dir, "vmlinuz"), initrd: filepath.Join(dir, "initramfs.cpio")}
	if err := os.WriteFile(f.vmlinuz, k.Image, 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := initramfs.Write(context.Background(), &buf, initramfs.Options{AgentFile: agent, KernelVersion: k.Version, Modules: mods, Epoch: testEpoch}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.initrd, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel %s, %d modules, initramfs %d bytes", k.Version, len(mods), buf.Len())
	return f
}

// rootDisk writes a root disk holding an ext4 file system with files
// (path → contents): a raw image, and a qcow2 one converted from it.
func rootDisk(t *testing.T, files map[string]string) (raw, disk string) {
	t.Helper()
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for name, body := range files {
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg, ModTime: time.Unix(testEpoch, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	raw = filepath.Join(dir, "root.ext4")
	f, err := os.Create(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ext4.Build(context.Background(), f, &tb, ext4.Options{Size: 64 << 20, Label: "sbx-root", Seed: []byte("boot test"), Epoch: testEpoch, JournalBlocks: 1024}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	disk = filepath.Join(dir, "root.qcow2")
	if err := qcow2.ConvertFile(context.Background(), disk, raw, qcow2.Options{}); err != nil {
		t.Fatal(err)
	}
	return raw, disk
}

// boot runs QEMU on the fixture with an optional qcow2 disk and extra
// kernel parameters, and returns the serial console output once QEMU
// exits. QEMU not exiting on its own within the timeout fails the test.
func (f *bootFixture) boot(t *testing.T, disk, format string, params ...string) string {
	t.Helper()
	args := []string{
		"-machine", "q35", "-accel", "tcg", "-cpu", "qemu64", "-m", "512", "-smp", "1",
		"-nodefaults", "-no-reboot", "-display", "none", "-serial", "stdio",
		"-kernel", f.vmlinuz, "-initrd", f.initrd,
		"-append", strings.Join(append([]string{"console=ttyS0", "panic=-1", "quiet"}, params...), " "),
	}
	if disk != "" {
		args = append(args, "-drive", "file="+disk+",if=none,id=d0,format="+format, "-device", "virtio-blk-pci,drive=d0")
	}
	const timeout = 150 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.qemu, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	start := time.Now()
	err := cmd.Run()
	console := out.String()
	t.Logf("QEMU ran %v; console:\n%s", time.Since(start).Round(time.Millisecond), console)
	if ctx.Err() != nil {
		t.Fatalf("QEMU did not exit within %v: the guest hung", timeout)
	}
	if err != nil {
		t.Fatalf("QEMU: %v", err)
	}
	if strings.Contains(console, "Kernel panic") {
		t.Errorf("the kernel panicked instead of powering off")
	}
	if !strings.Contains(console, "reboot: Power down") {
		t.Errorf("the console does not show the kernel powering down")
	}
	return console
}

func TestBoot(t *testing.T) {
	f := newBootFixture(t)

	t.Run("ready", func(t *testing.T) {
		t.Parallel()
		_, disk := rootDisk(t, map[string]string{"etc/hostname": "boot-test-42\n", "etc/motd": "hello\n"})
		console := f.boot(t, disk, "qcow2")
		ready, ok, err := bootproto.ParseReady([]byte(console))
		if err != nil || !ok {
			t.Fatalf("no ready line (%v)", err)
		}
		if msg, bad := bootproto.ParseError([]byte(console)); bad {
			t.Errorf("error line: %s", msg)
		}
		if ready.Kernel != f.kernel.Version {
			t.Errorf("ready line names kernel %q, want %q", ready.Kernel, f.kernel.Version)
		}
		if ready.Hostname != "boot-test-42" {
			t.Errorf("host name %q, want the root disk's boot-test-42", ready.Hostname)
		}
		if ready.Mode != bootproto.ModeReadyPowerOff || ready.Root != "/dev/vda" {
			t.Errorf("mode %q root %q", ready.Mode, ready.Root)
		}
		if ready.Modules != len(f.modules) {
			t.Errorf("%d modules loaded, want all %d", ready.Modules, len(f.modules))
		}
		if ready.UptimeMillis <= 0 || ready.AgentMillis < 0 || ready.AgentMillis > ready.UptimeMillis {
			t.Errorf("implausible timing: uptime %d ms, agent %d ms", ready.UptimeMillis, ready.AgentMillis)
		}
		if n := strings.Count(console, bootproto.ReadyPrefix); n != 1 {
			t.Errorf("%d ready lines, want exactly one", n)
		}
	})

	// A raw disk this time, read back after the guest is off: the
	// switch to the root disk made the kernel mount points on it, and
	// the power-off left it clean.
	t.Run("hostname-from-cmdline-raw-disk", func(t *testing.T) {
		t.Parallel()
		raw, _ := rootDisk(t, map[string]string{"etc/hostname": "from-disk\n"})
		console := f.boot(t, raw, "raw", bootproto.ParamHostname+"=from-cmdline")
		ready, ok, err := bootproto.ParseReady([]byte(console))
		if err != nil || !ok {
			t.Fatalf("no ready line (%v)", err)
		}
		if ready.Hostname != "from-cmdline" {
			t.Errorf("host name %q, want from-cmdline", ready.Hostname)
		}
		e2fsck, err1 := exec.LookPath("e2fsck")
		debugfs, err2 := exec.LookPath("debugfs")
		if err1 != nil || err2 != nil {
			t.Skip("SKIPPING THE DISK CHECK: e2fsck or debugfs is not on PATH; install the Debian package e2fsprogs to run it")
		}
		if out, err := exec.Command(e2fsck, "-fn", raw).CombinedOutput(); err != nil {
			t.Errorf("the root disk is not clean after power-off: e2fsck -fn: %v\n%s", err, out)
		}
		out, err := exec.Command(debugfs, "-R", "ls -p /", raw).Output()
		if err != nil {
			t.Fatalf("debugfs: %v", err)
		}
		for _, dir := range []string{"dev", "proc", "run", "sys"} {
			if !strings.Contains(string(out), "/"+dir+"/") {
				t.Errorf("the root disk has no /%s mount point; debugfs ls:\n%s", dir, out)
			}
		}
	})

	t.Run("no-disk", func(t *testing.T) {
		t.Parallel()
		console := f.boot(t, "", "", bootproto.ParamRootWait+"=3s")
		msg, ok := bootproto.ParseError([]byte(console))
		if !ok {
			t.Fatal("no error line")
		}
		if !strings.Contains(msg, "root disk /dev/vda did not appear within 3s") {
			t.Errorf("error line %q does not say the disk is missing", msg)
		}
		if _, ok, _ := bootproto.ParseReady([]byte(console)); ok {
			t.Error("a ready line without a root disk")
		}
	})

	t.Run("not-ext4", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		raw := filepath.Join(dir, "junk.raw")
		if err := os.WriteFile(raw, bytes.Repeat([]byte("not a file system "), 1<<16), 0o644); err != nil {
			t.Fatal(err)
		}
		disk := filepath.Join(dir, "junk.qcow2")
		if err := qcow2.ConvertFile(context.Background(), disk, raw, qcow2.Options{}); err != nil {
			t.Fatal(err)
		}
		console := f.boot(t, disk, "qcow2")
		msg, ok := bootproto.ParseError([]byte(console))
		if !ok {
			t.Fatal("no error line")
		}
		if !strings.Contains(msg, "root disk /dev/vda is not an ext4 file system") {
			t.Errorf("error line %q does not say the disk is not ext4", msg)
		}
	})
}
