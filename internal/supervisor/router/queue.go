package router

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

// Bounds of a client's outbound queue. The queue counts each frame as its
// bytes plus queueFrameCost, and refuses a frame that would take it past
//
//	queueBase + queueSession × (sessions of the client not yet ended)
//
// where a session counts from its opening until its last frame (Exit or
// Result) has been written to the client. The router's checks of the
// guest's frames make the per-session term an upper bound on what a guest
// that passes them can queue for a session, however slowly the client
// reads:
//   - data: the credit the client granted, at most InitialWindow bytes per
//     channel and two channels per session, in at most
//     queueDataFrames frames per channel since the queue merges the data
//     frames of one channel waiting in it (below);
//   - control frames: Started, FileInfo, an EOF per channel and the
//     closing Exit or Result, each at most once and at most
//     maxGuestControl bytes, and the guest's stdin windows, merged too.
//
// queueBase covers what comes on stream 0 (pongs for the at most
// maxPendingPings pings a client has in flight, a final error) and the
// router's own refusals. Only a client can take its queue past that: one
// that stops reading while it keeps asking (pings, stdin it is granted
// window for, sessions refused); it is dropped. The memory behind the
// count is at most about twice it, since a merged frame's allocation
// grows by doubling.
//
// A client that stops reading is not dropped for that alone: with its
// queue full of what it was granted, its sessions wait on credit, as
// "sbx exec" stopped with Ctrl-Z expects to find them when resumed.
const (
	// queueFrameCost is what a queued frame costs beyond its bytes: its
	// slice header and the rounding of its allocation.
	queueFrameCost = 64
	// queueDataFrames bounds the data frames of one channel in the
	// queue: merged, any two consecutive ones hold more than MaxData
	// bytes, in the frames waiting and in the batch being written.
	queueDataFrames = 2 * (2*agentproto.InitialWindow/agentproto.MaxData + 1)
	// queueControlFrames bounds a session's guest control frames in the
	// queue: Started or FileInfo, two EOFs, Exit or Result, and two
	// merged stdin windows (one waiting, one being written).
	queueControlFrames = 6
	queueSession       = 2*(agentproto.InitialWindow+queueDataFrames*(agentproto.HeaderSize+1+queueFrameCost)) +
		queueControlFrames*(agentproto.HeaderSize+maxGuestControl+queueFrameCost)
	queueBase = 1 << 20
)

// errQueueFull is the error of a client whose queue went past its bound.
var errQueueFull = errors.New("the client does not read what it asked for: its queue is full")

// errQueueClosed is the error of a push to a closed queue.
var errQueueClosed = errors.New("the client's queue is closed")

// outQueue holds the frames on their way to one client, so that the loop
// reading the guest never waits for a slow client. It is bounded (see
// queueBase): a push that would take it past its bound fails with
// errQueueFull, and the queue then drops what it holds and stops, so that
// the router can drop the client. Data frames of one stream and channel
// that wait in the queue are merged, and so are window frames, so that
// many small frames cost no more than a few large ones.
type outQueue struct {
	mu       sync.Mutex
	frames   []queued         // waiting, in order
	merge    map[mergeKey]int // index in frames of the last data or window frame of a key
	bytes    int              // cost of the frames waiting and being written
	high     int
	sessions int // sessions whose last frame has not been written yet
	closed   bool
	err      error // errQueueFull once the bound was passed
	wake     chan struct{}
}

// queued is one encoded frame.
type queued struct {
	b []byte
	// ends says the frame is the last of a session, which stops
	// counting in the bound once the frame is written.
	ends bool
}

type mergeKey struct {
	stream uint32
	t      agentproto.Type
	ch     agentproto.Channel
}

func newOutQueue() *outQueue {
	return &outQueue{merge: map[mergeKey]int{}, wake: make(chan struct{}, 1)}
}

// limit returns the queue's bound in bytes. It is called with q.mu held.
func (q *outQueue) limit() int { return queueBase + q.sessions*queueSession }

// opened counts a session the client opened in the queue's bound, until
// pushEnd's frame for it has been written.
func (q *outQueue) opened() {
	q.mu.Lock()
	q.sessions++
	q.mu.Unlock()
}

// push queues one encoded frame. It fails with errQueueFull when the
// frame would take the queue past its bound, and with errQueueClosed once the
// queue is closed.
func (q *outQueue) push(frame []byte) error { return q.add(queued{b: frame}) }

// pushEnd queues the last frame of a session opened with opened.
func (q *outQueue) pushEnd(frame []byte) error { return q.add(queued{b: frame, ends: true}) }

func (q *outQueue) add(f queued) error {
	q.mu.Lock()
	if err := q.room(len(f.b) + queueFrameCost); err != nil {
		q.mu.Unlock()
		return err
	}
	q.frames = append(q.frames, f)
	q.mu.Unlock()
	q.signal()
	return nil
}

// room takes cost bytes of the bound, or fails; called with q.mu held.
// Passing the bound stops the queue and drops its frames.
func (q *outQueue) room(cost int) error {
	if q.err != nil {
		return q.err
	}
	if q.closed {
		return errQueueClosed
	}
	if q.bytes+cost > q.limit() {
		q.err = fmt.Errorf("%w (%d bytes queued, bound %d)", errQueueFull, q.bytes, q.limit())
		q.closed = true
		q.frames, q.merge = nil, nil
		q.signal()
		return q.err
	}
	q.bytes += cost
	q.high = max(q.high, q.bytes)
	return nil
}

// pushData queues data bytes for a stream and channel, appending them to
// the channel's last data frame still waiting when they fit in MaxData.
func (q *outQueue) pushData(stream uint32, ch agentproto.Channel, data []byte) error {
	k := mergeKey{stream, agentproto.TypeData, ch}
	q.mu.Lock()
	if i, ok := q.merge[k]; ok && len(q.frames[i].b)+len(data) <= agentproto.HeaderSize+1+agentproto.MaxData {
		if err := q.room(len(data)); err != nil {
			q.mu.Unlock()
			return err
		}
		b := append(q.frames[i].b, data...)
		binary.BigEndian.PutUint32(b[0:4], uint32(len(b)-agentproto.HeaderSize))
		q.frames[i].b = b
		q.mu.Unlock()
		return nil
	}
	b, err := agentproto.AppendFrame(make([]byte, 0, agentproto.HeaderSize+1+len(data)), agentproto.TypeData, stream, []byte{byte(ch)}, data)
	if err == nil {
		err = q.room(len(b) + queueFrameCost)
	}
	if err != nil {
		q.mu.Unlock()
		return err
	}
	q.merge[k] = len(q.frames)
	q.frames = append(q.frames, queued{b: b})
	q.mu.Unlock()
	q.signal()
	return nil
}

// pushWindow queues a credit increment for a stream and channel, adding it
// to the channel's window frame still waiting when there is one.
func (q *outQueue) pushWindow(stream uint32, ch agentproto.Channel, n uint32) error {
	k := mergeKey{stream, agentproto.TypeWindow, ch}
	q.mu.Lock()
	if i, ok := q.merge[k]; ok && !q.closed {
		b := q.frames[i].b
		prev := binary.BigEndian.Uint32(b[agentproto.HeaderSize+1:])
		if uint64(prev)+uint64(n) <= math.MaxUint32 {
			binary.BigEndian.PutUint32(b[agentproto.HeaderSize+1:], prev+n)
			q.mu.Unlock()
			return nil
		}
	}
	var p [5]byte
	p[0] = byte(ch)
	binary.BigEndian.PutUint32(p[1:], n)
	b, err := agentproto.AppendFrame(nil, agentproto.TypeWindow, stream, p[:])
	if err == nil {
		err = q.room(len(b) + queueFrameCost)
	}
	if err != nil {
		q.mu.Unlock()
		return err
	}
	q.merge[k] = len(q.frames)
	q.frames = append(q.frames, queued{b: b})
	q.mu.Unlock()
	q.signal()
	return nil
}

func (q *outQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close stops the queue; frames already queued are still written.
func (q *outQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

// highWater returns the most bytes the queue has counted at once.
func (q *outQueue) highWater() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.high
}

// writeTo writes queued frames to w, in order, until the queue is closed
// and empty, a write fails or the queue passes its bound (errQueueFull).
func (q *outQueue) writeTo(w io.Writer) error {
	for {
		q.mu.Lock()
		frames, closed, qerr := q.frames, q.closed, q.err
		q.frames = nil
		clear(q.merge)
		q.mu.Unlock()
		if qerr != nil {
			return qerr
		}
		if len(frames) > 0 {
			bufs := make(net.Buffers, len(frames))
			cost, ends := 0, 0
			for i, f := range frames {
				bufs[i] = f.b
				cost += len(f.b) + queueFrameCost
				if f.ends {
					ends++
				}
			}
			_, err := bufs.WriteTo(w)
			q.mu.Lock()
			q.bytes -= cost
			q.sessions -= ends
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
