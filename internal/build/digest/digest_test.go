package digest_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/digest"
)

func TestFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	body := []byte("hello\n")
	if err := os.WriteFile(p, body, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	got, n, err := digest.File(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got != hex.EncodeToString(sum[:]) || n != int64(len(body)) {
		t.Errorf("File = %s, %d; want %x, %d", got, n, sum, len(body))
	}
}

// A FIFO in place of a file would block a hash forever; File refuses it
// before reading.
func TestFileRefusesFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	// Opening a FIFO for reading blocks until a writer comes; one that
	// never writes lets the open return.
	go func() {
		w, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err == nil {
			time.Sleep(100 * time.Millisecond)
			w.Close()
		}
	}()
	_, _, err := digest.File(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("File(fifo) = %v, want a not-a-regular-file error", err)
	}
}

func TestFileStopsWhenCancelled(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := digest.File(ctx, p); !errors.Is(err, context.Canceled) {
		t.Fatalf("File with a cancelled context = %v, want context.Canceled", err)
	}
}
