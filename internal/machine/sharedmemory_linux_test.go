package machine

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSharedMemory: a machine with file system slots gets RAM it can
// share with a backend: empty, or a writable copy of the saved memory
// whose writes never reach the saved copy; a size that differs from
// the machine's is refused.
func TestSharedMemory(t *testing.T) {
	const size = 8 << 20
	fresh, err := sharedMemory(size, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if fi, _ := fresh.Stat(); fi.Size() != size {
		t.Errorf("fresh memory is %d bytes, want %d", fi.Size(), size)
	}

	path := filepath.Join(t.TempDir(), "saved")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	src.Truncate(size)
	src.WriteAt([]byte("booted guest"), 4<<20)
	saved, err := SealMemory(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer saved.Close()
	own, err := sharedMemory(size, saved)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	got := make([]byte, 12)
	if _, err := own.ReadAt(got, 4<<20); err != nil || string(got) != "booted guest" {
		t.Fatalf("copy holds %q (%v)", got, err)
	}
	m, err := unix.Mmap(int(own.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mapping the copy shared and writable: %v", err)
	}
	copy(m[4<<20:], "changed")
	unix.Munmap(m)
	saved.ReadAt(got, 4<<20)
	if !bytes.Equal(got, []byte("booted guest")) {
		t.Errorf("a write to the copy reached the saved memory: %q", got)
	}
	if _, err := sharedMemory(size*2, saved); err == nil {
		t.Error("a saved memory of another size was copied")
	}
}
