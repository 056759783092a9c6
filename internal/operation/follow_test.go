package operation

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
	go func() { done <- FollowFile(ctx, &out, path, func() bool { return true }, 10*time.Millisecond) }()

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
		t.Fatal("FollowFile did not return once its context ended")
	}
}
