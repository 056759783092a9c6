package qcow2

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sbx-dev/sbx/internal/builders/ctxio/ctxiotest"
)

// cancellingWriter cancels its context at its k-th write (0: never), as
// a Ctrl-C arriving while that write is under way, and counts the writes
// after that one.
type cancellingWriter struct {
	memWriterAt
	k      int
	cancel context.CancelFunc
	writes int
	late   int
}

func (c *cancellingWriter) WriteAt(p []byte, off int64) (int, error) {
	c.writes++
	switch {
	case c.k > 0 && c.writes == c.k:
		c.cancel()
	case c.k > 0 && c.writes > c.k:
		c.late++
	}
	return c.memWriterAt.WriteAt(p, off)
}

// sparseCase is a raw image with data spread over many chunks, so that
// a conversion makes many writes: data, then tables.
func sparseCase() rawCase {
	var pieces []piece
	for i := range int64(24) {
		pieces = append(pieces, piece{i * 2 << 20, []byte("data in its own cluster")})
	}
	return rawCase{name: "spread", size: 48 << 20, pieces: pieces, clusterBits: 16}
}

// Cancelled during a write — of the first data, of later data, of the
// tables at the end — Convert returns the context's error and no write
// reaches the image after that one.
func TestConvertStopsWhenCancelled(t *testing.T) {
	c := sparseCase()
	f, err := os.Open(writeRaw(t, t.TempDir(), c))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opts := Options{ClusterBits: c.clusterBits}
	whole := &cancellingWriter{}
	if err := Convert(context.Background(), whole, f, c.size, opts); err != nil {
		t.Fatal(err)
	}
	n := whole.writes
	if n < 10 {
		t.Fatalf("a whole conversion made %d writes; the test needs more to cancel in the middle", n)
	}
	for _, k := range []int{1, n / 2, n - 1} {
		ctx, cancel := context.WithCancel(context.Background())
		w := &cancellingWriter{k: k, cancel: cancel}
		err := Convert(ctx, w, f, c.size, opts)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled at write %d of %d: Convert = %v, want context.Canceled", k, n, err)
		}
		if w.late != 0 {
			t.Errorf("cancelled at write %d of %d: %d more writes reached the image", k, n, w.late)
		}
	}
}

// Cancelled halfway through, ConvertFile returns the context's error and
// leaves no image and no temporary file; an earlier image at the path
// stays as it was.
func TestConvertFileCancelledLeavesNothing(t *testing.T) {
	c := sparseCase()
	dir := t.TempDir()
	raw := writeRaw(t, dir, c)
	out := filepath.Join(t.TempDir(), "disk.qcow2")
	opts := Options{ClusterBits: c.clusterBits}

	whole := ctxiotest.CancelAt(0)
	defer whole.Stop()
	if err := ConvertFile(whole, out, raw, opts); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	for _, earlier := range []bool{false, true} {
		if earlier {
			if err := os.WriteFile(out, []byte("earlier image"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ctx := ctxiotest.CancelAt(whole.Calls() / 2)
		err := ConvertFile(ctx, out, raw, opts)
		ctx.Stop()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("ConvertFile cancelled halfway = %v, want context.Canceled", err)
		}
		entries, _ := os.ReadDir(filepath.Dir(out))
		b, rerr := os.ReadFile(out)
		switch {
		case !earlier && len(entries) != 0:
			t.Errorf("the cancelled conversion left %v", entries)
		case earlier && (len(entries) != 1 || rerr != nil || string(b) != "earlier image"):
			t.Errorf("the cancelled conversion left %v; the earlier image reads %q, %v", entries, b, rerr)
		}
	}
}
