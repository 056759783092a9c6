//go:build linux

package qemu

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/machine/vm"
	"github.com/sbx-dev/sbx/platform"
)

// TestLaunchPassesFiles starts a real (paused) QEMU with a memory file
// and a root disk's backing file, both open: QEMU has each as the
// descriptor its path names (MemoryFD, vm.BackingFD).
func TestLaunchPassesFiles(t *testing.T) {
	host := probeHost(t)
	dir := socketDir(t)
	fd, err := unix.MemfdCreate("sbx-test-memory", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	mem := os.NewFile(uintptr(fd), "sbx-test-memory")
	defer mem.Close()
	if err := mem.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	backing, err := os.Create(filepath.Join(t.TempDir(), "saved.qcow2"))
	if err != nil {
		t.Fatal(err)
	}
	defer backing.Close()
	spec := VMSpec{
		Name:        "fds",
		Platform:    platform.Platform{OS: "linux", Architecture: "amd64"},
		CPUs:        1,
		MemoryBytes: 64 << 20,
		QMPSocket:   filepath.Join(dir, "qmp.sock"),
		Paused:      true,
		QEMULog:     filepath.Join(dir, "qemu.log"),
		Memory:      &Memory{Path: mem.Name(), File: mem},
		RootBacking: backing,
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := Launch(ctx, spec, host)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	same := func(n int, f *os.File) bool {
		var a, b unix.Stat_t
		return unix.Stat("/proc/"+strconv.Itoa(p.Pid())+"/fd/"+strconv.Itoa(n), &a) == nil &&
			unix.Fstat(int(f.Fd()), &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
	}
	if !same(MemoryFD, mem) {
		t.Errorf("QEMU's descriptor %d is not the memory file", MemoryFD)
	}
	if !same(vm.BackingFD, backing) {
		t.Errorf("QEMU's descriptor %d is not the root disk's backing file", vm.BackingFD)
	}
}
