package ctxiotest

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
)

// Context cancels itself the n-th time its Err method is called.
type Context struct {
	context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	n     int
	calls int
}

// CancelAt returns a context that is cancelled at the n-th call of Err,
// or never when n is 0. Call Stop when done with it.
func CancelAt(n int) *Context {
	ctx, cancel := context.WithCancel(context.Background())
	return &Context{Context: ctx, cancel: cancel, n: n}
}

// Err counts the call, cancels the context at the n-th, and returns the
// context's error.
func (c *Context) Err() error {
	c.mu.Lock()
	c.calls++
	if c.calls == c.n {
		c.cancel()
	}
	c.mu.Unlock()
	return c.Context.Err()
}

// Calls is how many times Err has been called.
func (c *Context) Calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// Stop releases the context.
func (c *Context) Stop() { c.cancel() }

// CancellingWriterAt passes writes to W and cancels with Cancel at its
// K-th write (never when K is 0), as a Ctrl-C arriving while that write
// is under way. Writes counts every write, Late those after the K-th.
type CancellingWriterAt struct {
	W      io.WriterAt
	K      int
	Cancel context.CancelFunc

	Writes, Late int
}

// WriteAt counts the write, cancels at the K-th and passes it on.
func (c *CancellingWriterAt) WriteAt(p []byte, off int64) (int, error) {
	c.Writes++
	switch {
	case c.K > 0 && c.Writes == c.K:
		c.Cancel()
	case c.K > 0 && c.Writes > c.K:
		c.Late++
	}
	return c.W.WriteAt(p, off)
}

// CheckCancelDuringWrites runs write once to count its writes, then again
// cancelled during its first, middle and last-but-one write, each time
// into a fresh writer from newW, and fails t unless every cancelled run
// returns context.Canceled with no write after the one the cancel came
// in: the order of events Ctrl-C must produce in a disk writer.
func CheckCancelDuringWrites(t testing.TB, newW func() io.WriterAt, write func(context.Context, io.WriterAt) error) {
	t.Helper()
	whole := &CancellingWriterAt{W: newW()}
	if err := write(context.Background(), whole); err != nil {
		t.Fatal(err)
	}
	n := whole.Writes
	if n < 10 {
		t.Fatalf("a whole run made %d writes; the test needs more to cancel in the middle", n)
	}
	for _, k := range []int{1, n / 2, n - 1} {
		ctx, cancel := context.WithCancel(context.Background())
		w := &CancellingWriterAt{W: newW(), K: k, Cancel: cancel}
		err := write(ctx, w)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled at write %d of %d: %v, want context.Canceled", k, n, err)
		}
		if w.Late != 0 {
			t.Errorf("cancelled at write %d of %d: %d more writes came after", k, n, w.Late)
		}
	}
}
