package supervisor

import (
	"io"
	"net"
	"sync"
)

// outQueue holds the frames on their way to one client, so that the loop
// reading the guest never waits for a slow client. It needs no bound of
// its own: the data it holds is limited by the credit the client granted
// (at most agentproto.InitialWindow bytes per channel of each session),
// which the router enforces, and control frames are few per session.
type outQueue struct {
	mu     sync.Mutex
	frames [][]byte
	bytes  int
	high   int
	closed bool
	wake   chan struct{}
}

func newOutQueue() *outQueue {
	return &outQueue{wake: make(chan struct{}, 1)}
}

// push queues one encoded frame; it reports false once the queue is
// closed.
func (q *outQueue) push(frame []byte) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.frames = append(q.frames, frame)
	q.bytes += len(frame)
	q.high = max(q.high, q.bytes)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// close stops the queue; frames already queued are still written.
func (q *outQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// highWater returns the most bytes the queue has held at once.
func (q *outQueue) highWater() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.high
}

// writeTo writes queued frames to w, in order, until the queue is closed
// and empty or a write fails.
func (q *outQueue) writeTo(w io.Writer) error {
	for {
		q.mu.Lock()
		frames, closed := q.frames, q.closed
		q.frames = nil
		n := 0
		for _, f := range frames {
			n += len(f)
		}
		q.mu.Unlock()
		if len(frames) > 0 {
			bufs := net.Buffers(frames)
			_, err := bufs.WriteTo(w)
			q.mu.Lock()
			q.bytes -= n
			q.mu.Unlock()
			if err != nil {
				return err
			}
			continue
		}
		if closed {
			return nil
		}
		<-q.wake
	}
}
