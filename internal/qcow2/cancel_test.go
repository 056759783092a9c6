package qcow2

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sbx-dev/sbx/internal/ctxio/ctxiotest"
)

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
	ctxiotest.CheckCancelDuringWrites(t, func() io.WriterAt { return &memWriterAt{} }, func(ctx context.Context, w io.WriterAt) error {
		return Convert(ctx, w, f, c.size, opts)
	})
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
