package ctxio_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/sbx-dev/sbx/internal/ctxio"
)

// A copy through the wrappers stops at the first chunk after the
// context ends, and nothing more reaches the destination.
func TestCopyStopsAtTheNextChunk(t *testing.T) {
	for _, side := range []string{"reader", "writer"} {
		t.Run(side, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			src := iotest.OneByteReader(strings.NewReader(strings.Repeat("x", 100)))
			var dst bytes.Buffer
			var r io.Reader = src
			var w io.Writer = &cancelAfter{w: &dst, n: 10, cancel: cancel}
			if side == "reader" {
				r = ctxio.Reader(ctx, src)
			} else {
				w = ctxio.Writer(ctx, w)
			}
			_, err := io.Copy(w, r)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("io.Copy returned %v, want context.Canceled", err)
			}
			if dst.Len() != 10 {
				t.Errorf("%d bytes reached the destination, want the 10 written before the context ended", dst.Len())
			}
		})
	}
}

// cancelAfter cancels once n bytes have been written through it.
type cancelAfter struct {
	w      io.Writer
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if c.n -= n; c.n <= 0 {
		c.cancel()
	}
	return n, err
}

// A sequence of positioned writes (or reads) stops at the first call
// after the context ends; the calls before it went through.
func TestAtStopsAtTheNextCall(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, err := os.CreateTemp(t.TempDir(), "img")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, r := ctxio.WriterAt(ctx, f), ctxio.ReaderAt(ctx, f)
	buf := []byte("block")
	for i := range 3 {
		if _, err := w.WriteAt(buf, int64(i*len(buf))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := w.WriteAt([]byte("late!"), 0); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteAt after cancel = %v, want context.Canceled", err)
	}
	if _, err := r.ReadAt(buf, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadAt after cancel = %v, want context.Canceled", err)
	}
	if b, _ := os.ReadFile(f.Name()); string(b) != "blockblockblock" {
		t.Errorf("file holds %q, want the three writes before the cancel only", b)
	}
}
