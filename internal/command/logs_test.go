package command

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestFollowAcrossRotation: "logs -f" goes on printing a console log
// across its rotations, every byte once.
func TestFollowAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "console.log")
	w, err := consolelog.Create(path, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Write([]byte("first line\n"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() { done <- followFile(ctx, &out, path, func() bool { return true }, 10*time.Millisecond) }()

	want := []byte("first line\n")
	for i := 0; i < 20; i++ {
		chunk := []byte(strings.Repeat(fmt.Sprintf("chunk %02d\n", i), 30))
		w.Write(chunk)
		want = append(want, chunk...)
		// Each chunk is printed before the next is written, so that the
		// log never rotates twice between two looks.
		for j := 0; j < 500 && len(out.Bytes()) < len(want); j++ {
			time.Sleep(10 * time.Millisecond)
		}
		if got := out.Bytes(); !bytes.Equal(got, want) {
			t.Fatalf("after chunk %d, -f printed %d bytes, want %d; it ends %q", i, len(got), len(want), got[max(0, len(got)-40):])
		}
	}
	if _, err := os.Stat(consolelog.Rotated(path)); err != nil {
		t.Fatalf("the log never rotated: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("followFile did not return once its context ended")
	}
}
