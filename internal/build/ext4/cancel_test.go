package ext4

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/sbx-dev/sbx/internal/ctxio/ctxiotest"
)

// Cancelled during a write — of the journal, of file data, of the
// metadata at the end — Build returns the context's error and no write
// reaches the image after that one.
func TestBuildStopsWhenCancelled(t *testing.T) {
	var entries []entry
	for i := range 8 {
		entries = append(entries, file(fmt.Sprintf("data/f%d", i), 0o644, randomBytes(uint64(i), 1<<20)))
	}
	tarball := makeTar(t, entries)
	opts := testOptions()
	opts.Size = 32 << 20
	opts.JournalBlocks = 1024

	ctxiotest.CheckCancelDuringWrites(t, func() io.WriterAt { return &memImage{} }, func(ctx context.Context, w io.WriterAt) error {
		_, err := Build(ctx, w, bytes.NewReader(tarball), opts)
		return err
	})
}
