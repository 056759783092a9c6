package consolelog

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// DefaultQueue is how many bytes a Capture holds for its log when none
// is given.
const DefaultQueue = 1 << 20

// Capture copies a console stream into a log. One goroutine reads the
// stream into a queue of bounded size, another writes the queue to the
// log, so the stream is read as fast as it comes whatever the log's
// speed. When the queue is full, what the stream brings and does not fit
// is dropped, and once the log has caught up it gets a line saying how
// many bytes were lost. A log write that fails loses its bytes the same
// way, and the capture goes on.
//
// The capture ends when the stream ends (io.EOF) or fails: the caller
// closes the stream to end it, and Wait waits for the log to have all
// the queue. The capture closes neither the stream nor the log.
type Capture struct {
	r     io.Reader
	w     io.Writer
	queue int

	mu       sync.Mutex
	wake     *sync.Cond // the reader queued data or ended
	pending  []byte     // read and not yet written
	lost     int64      // dropped after pending, not yet reported in the log
	dropped  int64      // dropped in all
	queued   int64      // bytes read and queued, in all
	handled  int64      // of those, written or lost since
	ended    bool       // the reader is done
	progress chan struct{}
	done     chan struct{} // closed once the writer is done
}

// NewCapture starts copying r to w through a queue of at most queue
// bytes (zero or less means DefaultQueue).
func NewCapture(r io.Reader, w io.Writer, queue int) *Capture {
	if queue <= 0 {
		queue = DefaultQueue
	}
	c := &Capture{r: r, w: w, queue: queue, progress: make(chan struct{}), done: make(chan struct{})}
	c.wake = sync.NewCond(&c.mu)
	go c.read()
	go c.write()
	return c
}

func (c *Capture) read() {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.r.Read(buf)
		if n > 0 {
			c.mu.Lock()
			k := min(n, c.queue-len(c.pending))
			c.pending = append(c.pending, buf[:k]...)
			c.queued += int64(k)
			c.lost += int64(n - k)
			c.dropped += int64(n - k)
			c.wake.Signal()
			c.mu.Unlock()
		}
		if err != nil {
			c.mu.Lock()
			c.ended = true
			c.wake.Signal()
			c.mu.Unlock()
			return
		}
	}
}

func (c *Capture) write() {
	defer close(c.done)
	var spare []byte
	for {
		c.mu.Lock()
		for len(c.pending) == 0 && c.lost == 0 && !c.ended {
			c.wake.Wait()
		}
		if len(c.pending) == 0 && c.lost == 0 {
			c.mu.Unlock()
			return
		}
		// Take the queue, and the count of what was dropped after it:
		// everything queued later follows the drop.
		data, lost := c.pending, c.lost
		c.pending, c.lost = spare[:0], 0
		c.mu.Unlock()

		var failed int64
		if n, err := c.w.Write(data); err != nil {
			failed = int64(len(data) - n)
		}
		if lost+failed > 0 {
			fmt.Fprintf(c.w, "\n[sbx: %d bytes of console output lost: the host's log could not keep up]\n", lost+failed)
		}

		c.mu.Lock()
		spare = data
		c.handled += int64(len(data))
		c.dropped += failed
		close(c.progress)
		c.progress = make(chan struct{})
		c.mu.Unlock()
	}
}

// Flush waits, at most timeout, until everything the capture has read
// so far is in the log (or lost), and reports whether it is.
func (c *Capture) Flush(timeout time.Duration) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	c.mu.Lock()
	target := c.queued
	for c.handled < target {
		ch := c.progress
		c.mu.Unlock()
		select {
		case <-ch:
		case <-c.done:
			return true
		case <-timer.C:
			return false
		}
		c.mu.Lock()
	}
	c.mu.Unlock()
	return true
}

// Wait waits, at most timeout, until the stream has ended and the log
// has everything read from it, and reports whether it has.
func (c *Capture) Wait(timeout time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Done is closed once the stream has ended and the log has everything
// read from it.
func (c *Capture) Done() <-chan struct{} { return c.done }

// Dropped returns how many of the stream's bytes the log did not get so
// far: dropped from a full queue, or lost to a failed write.
func (c *Capture) Dropped() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}
