package command

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sbx-dev/sbx/internal/machine/consolelog"
)

// TestPrintLogByItsEnd: a console log of 100 MiB (a sparse file standing
// for one an older sbx let grow) is printed by its last cap's worth,
// after its rotated predecessor, and what was left out is said.
func TestPrintLogByItsEnd(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "console.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	const huge = 100 << 20
	if _, err := f.WriteAt([]byte("the end\n"), huge-8); err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.WriteFile(consolelog.Rotated(path), []byte("before\n"), 0o600)

	var out countingWriter
	var stderr bytes.Buffer
	if err := printLog(&out, &stderr, path, true); err != nil {
		t.Fatal(err)
	}
	if want := int64(len("before\n") + consolelog.DefaultMax); out.n != want {
		t.Errorf("printed %d bytes, want %d: the rotated file and the cap's worth of the current one", out.n, want)
	}
	if !bytes.HasPrefix(out.head, []byte("before\n")) || !bytes.HasSuffix(out.tail, []byte("the end\n")) {
		t.Errorf("printed %q … %q", out.head, out.tail)
	}
	if want := fmt.Sprintf("left out the first %d bytes of %s", huge-consolelog.DefaultMax, path); !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}

type countingWriter struct {
	n          int64
	head, tail []byte
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		w.head = append([]byte(nil), p[:min(len(p), 64)]...)
	}
	w.n += int64(len(p))
	w.tail = append(w.tail[:0], p[max(0, len(p)-64):]...)
	return len(p), nil
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}
