package guest_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/ext4"
	"github.com/sbx-dev/sbx/internal/guest"
	"github.com/sbx-dev/sbx/internal/guest/initsys/initsystest"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
)

// Init runs here against a temporary directory standing for the guest's
// root and a Sys that records calls; boot_vm_test.go runs it for real.

// syncBuffer is a console the watchdog and the boot may write at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func ext4Disk(t *testing.T) string {
	t.Helper()
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	tw.WriteHeader(&tar.Header{Name: "etc/", Mode: 0o755, Typeflag: tar.TypeDir})
	tw.Close()
	p := filepath.Join(t.TempDir(), "disk")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := ext4.Build(context.Background(), f, &tb, ext4.Options{Size: 8 << 20, Seed: []byte("init test"), Epoch: 1700000000}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// guestRoot is a root as the kernel and the initramfs leave it, with the
// root disk present and its contents already visible at /sysroot (the
// recorded mount does not mount).
func guestRoot(t *testing.T, cmdline string) map[string]string {
	return map[string]string{
		"proc/cmdline":              "console=ttyS0 " + cmdline + "\n",
		"proc/sys/kernel/osrelease": "6.1.0-test-amd64\n",
		"proc/uptime":               "2.50 1.00\n",
		"sys/class/block/vda/":      "",
		"dev/vda":                   ext4Disk(t),
		bootproto.ModuleListPath:    "virtio_blk lib/modules/6.1.0-test-amd64/kernel/virtio_blk.ko\n",
		"lib/modules/6.1.0-test-amd64/kernel/virtio_blk.ko": "\x7fELF",
		"sysroot/etc/hostname":                              "from-disk\n",
	}
}

func run(t *testing.T, files map[string]string, rec *initsystest.Recorder) (string, error) {
	t.Helper()
	rec.Root = initsystest.MakeRoot(t, files)
	var console syncBuffer
	err := guest.Init(guest.Options{Root: rec.Root, Sys: rec, Console: &console, Poll: time.Millisecond})
	return console.String(), err
}

func TestInitReady(t *testing.T) {
	rec := &initsystest.Recorder{}
	console, err := run(t, guestRoot(t, ""), rec)
	if err != nil {
		t.Fatal(err)
	}
	ready, ok, perr := bootproto.ParseReady([]byte(console))
	if !ok || perr != nil {
		t.Fatalf("no ready line in %q (%v)", console, perr)
	}
	if ready.Kernel != "6.1.0-test-amd64" || ready.Hostname != "from-disk" || ready.Modules != 1 ||
		ready.Mode != bootproto.ModeReadyPowerOff || ready.Root != "/dev/vda" || ready.UptimeMillis != 2500 {
		t.Errorf("ready %+v", ready)
	}
	if !strings.HasPrefix(console, bootproto.ReadyPrefix) || strings.Count(console, "\n") != 1 {
		t.Errorf("console %q, want the ready line alone", console)
	}
	calls := rec.Calls()
	want := []string{
		"mount proc /proc proc nosuid,nodev,noexec",
		"mount sysfs /sys sysfs nosuid,nodev,noexec",
		"mount devtmpfs /dev devtmpfs nosuid mode=0755",
		"mount tmpfs /run tmpfs nosuid,nodev mode=0755",
		"load /lib/modules/6.1.0-test-amd64/kernel/virtio_blk.ko",
		"mount /dev/vda /sysroot ext4 -",
		"mount /proc /sysroot/proc - move",
		"mount /sys /sysroot/sys - move",
		"mount /dev /sysroot/dev - move",
		"mount /run /sysroot/run - move",
		"switchroot /sysroot",
		"sethostname from-disk",
		"sync",
		"mount - / - ro,remount",
		"sync",
		"poweroff",
	}
	if strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
}

// checkFailed checks that boot printed exactly one error line, containing
// want, and powered off once, as the last call.
func checkFailed(t *testing.T, console string, rec *initsystest.Recorder, want string) {
	t.Helper()
	msg, ok := bootproto.ParseError([]byte(console))
	if !ok || !strings.Contains(msg, want) {
		t.Errorf("console %q, want an error line containing %q", console, want)
	}
	if n := strings.Count(console, bootproto.ErrorPrefix); n != 1 {
		t.Errorf("%d error lines, want 1: %q", n, console)
	}
	if _, ok, _ := bootproto.ParseReady([]byte(console)); ok {
		t.Errorf("a ready line after a failure: %q", console)
	}
	calls := rec.Calls()
	if len(calls) == 0 || calls[len(calls)-1] != "poweroff" || strings.Count(strings.Join(calls, "\n"), "poweroff") != 1 {
		t.Errorf("calls %q, want one poweroff at the end", calls)
	}
}

func TestInitFailures(t *testing.T) {
	for _, c := range []struct {
		name    string
		cmdline string
		change  func(map[string]string)
		fail    func(string) error
		want    string
	}{
		{name: "no disk", cmdline: "sbx.rootwait=20ms",
			change: func(m map[string]string) { delete(m, "sys/class/block/vda/"); delete(m, "dev/vda") },
			want:   "root disk /dev/vda did not appear within 20ms (there are no block devices)"},
		{name: "not ext4",
			change: func(m map[string]string) { m["dev/vda"] = strings.Repeat("x", 4096) },
			want:   "root disk /dev/vda is not an ext4 file system"},
		{name: "bad command line", cmdline: "sbx.mode=shell",
			want: `/proc/cmdline: kernel parameter sbx.mode: unknown mode "shell"`},
		{name: "mount fails",
			fail: func(call string) error {
				if strings.HasPrefix(call, "mount /dev/vda") {
					return syscall.EINVAL
				}
				return nil
			},
			want: "mounting root disk /dev/vda (ext4) at /sysroot: invalid argument"},
		{name: "no proc",
			fail: func(call string) error {
				if strings.HasPrefix(call, "mount proc") {
					return syscall.EPERM
				}
				return nil
			},
			want: "mounting proc on /proc: operation not permitted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := guestRoot(t, c.cmdline)
			if c.change != nil {
				c.change(files)
			}
			rec := &initsystest.Recorder{Fail: c.fail}
			console, err := run(t, files, rec)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Init = %v, want an error containing %q", err, c.want)
			}
			checkFailed(t, console, rec, c.want)
		})
	}
}

func TestInitPanic(t *testing.T) {
	rec := &initsystest.Recorder{Hook: func(call string) {
		if strings.HasPrefix(call, "sethostname") {
			panic("boom")
		}
	}}
	console, err := run(t, guestRoot(t, ""), rec)
	if err == nil || !strings.HasPrefix(err.Error(), "panic: boom") {
		t.Errorf("Init = %v, want the panic", err)
	}
	checkFailed(t, console, rec, "panic: boom")
	// The stack is on the same line, so the console shows where.
	if !strings.Contains(console, "initsystest") {
		t.Errorf("the error line has no stack: %q", console)
	}
}

func TestInitWatchdog(t *testing.T) {
	files := guestRoot(t, "sbx.boottimeout=100ms sbx.rootwait=1h")
	delete(files, "dev/vda")
	rec := &initsystest.Recorder{}
	start := time.Now()
	console, err := run(t, files, rec)
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("Init took %v with a 100ms boot timeout", d)
	}
	if err == nil || !strings.Contains(err.Error(), "stopped waiting for root disk /dev/vda") {
		t.Errorf("Init = %v, want the wait stopped", err)
	}
	checkFailed(t, console, rec, "boot did not finish within 100ms (sbx.boottimeout)")
}

func TestInitPowerOffFails(t *testing.T) {
	rec := &initsystest.Recorder{Fail: func(call string) error {
		if call == "poweroff" {
			return syscall.EPERM
		}
		return nil
	}}
	console, err := run(t, guestRoot(t, ""), rec)
	if err == nil || !errors.Is(err, syscall.EPERM) || !strings.Contains(err.Error(), "powering off") {
		t.Errorf("Init = %v, want the power-off error", err)
	}
	if !strings.Contains(console, bootproto.ReadyPrefix) || !strings.Contains(console, "sbx-guest: error: powering off: operation not permitted\n") {
		t.Errorf("console %q", console)
	}
}
