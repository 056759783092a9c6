package machine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/consolelog"
)

// flood is what the hostile guest writes to its console: numbered lines,
// n bytes in all.
func flood(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "flood %08d ..................................................\n", i)
	}
	return b.Bytes()
}

// fileSize returns the size of path, or -1 when there is none.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// commonSuffix returns how many bytes a and b end with in common.
func commonSuffix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return n
}

// TestConsoleCapped plays a hostile guest that writes, as root, three
// times the console log's limit straight to its serial console: the host
// keeps at most the limit in each of the log's two files, those hold the
// end of what was written, and the log kept when the machine stops is
// bounded the same way.
func TestConsoleCapped(t *testing.T) {
	t.Parallel()
	const limit = 128 << 10
	keep := filepath.Join(t.TempDir(), "kept.log")
	m := start(t, machine.Options{ConsoleMax: limit, KeepConsole: keep})
	log := filepath.Join(m.Dir(), machine.ConsoleFile)

	data := flood(3 * limit)
	first, last := data[:bytes.IndexByte(data, '\n')+1], data[bytes.LastIndexByte(data[:len(data)-1], '\n')+1:]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := m.Put(ctx, bytes.NewReader(data), "/tmp/flood", 0o644, nil); err != nil {
		t.Fatal(err)
	}
	// The kernel's console is ttyS0 (internal/machine/qemu puts console=ttyS0
	// on the command line).
	start := time.Now()
	run(t, m, "root", 0, "sh", "-c", "cat /tmp/flood >/dev/ttyS0")
	t.Logf("the guest wrote %d bytes to its console in %v", len(data), time.Since(start).Round(time.Millisecond))

	// The tty turns each "\n" into "\r\n" on its way out.
	normal := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")) }
	var got []byte
	for i := 0; i < 300; i++ {
		b, err := consolelog.Tail(log, 2*limit)
		if err != nil {
			t.Fatal(err)
		}
		if got = normal(b); bytes.Contains(got, last) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cur, old := fileSize(t, log), fileSize(t, consolelog.Rotated(log))
	t.Logf("%s: %d bytes, %s: %d bytes", machine.ConsoleFile, cur, filepath.Base(consolelog.Rotated(log)), old)
	if cur > limit || old > limit {
		t.Errorf("the console log's files hold %d and %d bytes, over the limit of %d", cur, old, limit)
	}
	if cur+old > 2*limit {
		t.Errorf("the console log holds %d bytes, over twice the limit of %d", cur+old, limit)
	}
	i := bytes.LastIndex(got, last)
	if i < 0 {
		t.Fatalf("the console log lacks the flood's last line %q; it ends %q", last, got[max(0, len(got)-200):])
	}
	if n := commonSuffix(got[:i+len(last)], data); n < limit/2 {
		t.Errorf("the console log ends with only %d bytes of the flood's end", n)
	}
	if bytes.Contains(got, first) {
		t.Error("the console log still holds the flood's first line: nothing was rotated away")
	}

	if err := m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	cur, old = fileSize(t, keep), fileSize(t, consolelog.Rotated(keep))
	if cur < 0 || cur > limit || old > limit {
		t.Errorf("the kept console log's files hold %d and %d bytes; want at most the limit of %d each", cur, old, limit)
	}
	kept, _ := consolelog.Tail(keep, 2*limit)
	if !bytes.Contains(normal(kept), last) {
		t.Error("the kept console log lacks the flood's last line")
	}
}
