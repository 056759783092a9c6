package initramfs_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/initramfs"
)

// An interrupt while the initramfs is being written stops Write at once:
// the context is cancelled from the destination when the first module's
// header reaches it, and nothing more may be written (not that module's
// bytes, nor any file after it).
func TestWriteStopsWhenInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := sampleOptions(t)
	first := opts.Modules[0].File
	var w interruptingWriter
	w.at, w.cancel = first, cancel
	err := initramfs.Write(ctx, &w, opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Write returned %v, want an error wrapping context.Canceled", err)
	}
	if !w.cancelled {
		t.Fatalf("the module %s never reached the writer:\n%q", first, w.buf.String())
	}
	if w.after > 0 {
		t.Errorf("%d writes reached the destination after the interrupt", w.after)
	}
	if strings.Contains(w.buf.String(), "TRAILER!!!") {
		t.Errorf("the interrupted archive was finished with a trailer")
	}
}

// interruptingWriter cancels once a write naming at has reached it, and
// counts the writes that come after.
type interruptingWriter struct {
	buf       bytes.Buffer
	at        string
	cancel    context.CancelFunc
	cancelled bool
	after     int
}

func (w *interruptingWriter) Write(p []byte) (int, error) {
	if w.cancelled {
		w.after++
	}
	w.buf.Write(p)
	if !w.cancelled && bytes.Contains(p, []byte(w.at)) {
		w.cancel()
		w.cancelled = true
	}
	return len(p), nil
}
