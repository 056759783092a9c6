//go:build linux

package fanout

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// canClone reports whether the file system of dir reflinks, by trying.
func canClone(t *testing.T, dir string) bool {
	t.Helper()
	a, err := os.Create(filepath.Join(dir, "probe-a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.WriteString("probe")
	b, err := os.Create(filepath.Join(dir, "probe-b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	return unix.IoctlFileClone(int(b.Fd()), int(a.Fd())) == nil
}

// TestCopyTreeClones checks that files are reflinked exactly where the
// file system can (XFS, btrfs: run with TMPDIR there), copied otherwise
// (ext4, tmpfs), and that both give the same bytes; and that a run's
// write to its reflinked copy leaves the source as it was.
func TestCopyTreeClones(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	writeTree(t, src, map[string]string{"a.txt": "a\n", "sub/big.bin": string(big), "empty": ""})
	clones := canClone(t, dir)
	dst := filepath.Join(dir, "dst")
	st, err := CopyTree(context.Background(), src, dst, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reflinks here: %v; %+v", clones, st)
	if want := map[bool]int{true: 3, false: 0}[clones]; st.Cloned != want || st.Files != 3 || st.Bytes != int64(len(big)+2) {
		t.Errorf("copy stats %+v; the file system reflinks: %v", st, clones)
	}
	for name, want := range map[string][]byte{"a.txt": []byte("a\n"), "sub/big.bin": big, "empty": nil} {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, %v", name, len(got), err)
		}
	}
	f, err := os.OpenFile(filepath.Join(dst, "sub/big.bin"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("RUN"), 1000)
	f.Close()
	if got, _ := os.ReadFile(filepath.Join(src, "sub/big.bin")); !bytes.Equal(got, big) {
		t.Error("writing the copy changed the source")
	}
}
