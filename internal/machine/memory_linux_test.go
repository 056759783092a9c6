package machine_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/machine"
)

// TestSealMemory: the sealed copy of a sparse file holds its bytes,
// holes read as zeros, every chunk is handed to the sum, and nothing can
// write it, punch a hole in it or change its size.
func TestSealMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	const size = 64 << 20
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	pattern := bytes.Repeat([]byte("saved guest memory "), 1<<16)
	for _, off := range []int64{0, 10 << 20, size - int64(len(pattern))} {
		if _, err := f.WriteAt(pattern, off); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var summed int64
	mem, err := machine.SealMemory(f, func(off int64, b []byte) {
		if !bytes.Equal(b, want[off:off+int64(len(b))]) {
			t.Errorf("sum given other bytes at %d", off)
		}
		summed += int64(len(b))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if summed < 3*int64(len(pattern)) || summed >= size {
		t.Errorf("%d bytes summed: the data, not the holes, of %d", summed, size)
	}
	got, err := io.ReadAll(io.NewSectionReader(mem, 0, size+1))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the sealed copy differs from the file")
	}
	if _, err := mem.WriteAt([]byte("x"), 0); err == nil {
		t.Error("wrote the sealed memory")
	}
	if err := unix.Fallocate(int(mem.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 4096); err == nil {
		t.Error("punched a hole in the sealed memory")
	}
	if err := mem.Truncate(size / 2); err == nil {
		t.Error("shrank the sealed memory")
	}
	// Through /proc/self/fd, as QEMU opens it: a read-write open
	// succeeds (QEMU maps it private), a write through it does not.
	again, err := os.OpenFile("/proc/self/fd/"+itoa(int(mem.Fd())), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := again.WriteAt([]byte("x"), 0); err == nil {
		t.Error("wrote the sealed memory through a new open")
	}
	b, err := unix.Mmap(int(again.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("a private mapping: %v", err)
	}
	b[0] = 'X'
	unix.Munmap(b)
	if _, err := unix.Mmap(int(again.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
		t.Error("a shared writable mapping of the sealed memory")
	}
	head := make([]byte, 4)
	mem.ReadAt(head, 0)
	if string(head) != "save" {
		t.Errorf("the sealed memory begins %q after a private write", head)
	}
}

func itoa(i int) string {
	var b []byte
	for ; i > 0 || len(b) == 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
