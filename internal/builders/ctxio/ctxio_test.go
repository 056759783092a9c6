package ctxio_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/sbx-dev/sbx/internal/builders/ctxio"
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
