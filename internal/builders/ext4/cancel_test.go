package ext4

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
)

// cancellingImage is a memImage that cancels its context at its k-th
// write (0: never), as a Ctrl-C arriving while that write is under way,
// and counts the writes that reach it after that one.
type cancellingImage struct {
	memImage
	k      int
	cancel context.CancelFunc
	writes int
	late   int
}

func (c *cancellingImage) WriteAt(p []byte, off int64) (int, error) {
	c.writes++
	switch {
	case c.k > 0 && c.writes == c.k:
		c.cancel()
	case c.k > 0 && c.writes > c.k:
		c.late++
	}
	return c.memImage.WriteAt(p, off)
}

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

	whole := &cancellingImage{}
	if _, err := Build(context.Background(), whole, bytes.NewReader(tarball), opts); err != nil {
		t.Fatal(err)
	}
	n := whole.writes
	if n < 10 {
		t.Fatalf("a whole build made %d writes; the test needs more to cancel in the middle", n)
	}
	for _, k := range []int{1, n / 2, n - 1} {
		ctx, cancel := context.WithCancel(context.Background())
		img := &cancellingImage{k: k, cancel: cancel}
		_, err := Build(ctx, img, bytes.NewReader(tarball), opts)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled at write %d of %d: Build = %v, want context.Canceled", k, n, err)
		}
		if img.late != 0 {
			t.Errorf("cancelled at write %d of %d: %d more writes reached the image", k, n, img.late)
		}
	}
}
