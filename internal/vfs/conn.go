//go:build linux

package vfs

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"
)

// 9P2000.L message types the framing layer looks at.
const (
	msgRlerror      = 7
	msgTxattrwalk   = 30
	msgTxattrcreate = 32
	msgTreaddir     = 40
	msgTversion     = 100
	msgTread        = 116
)

const headerLen = 7 // size[4] type[1] tag[2]

// noTag is the tag of Tversion, and of the library's answer to a message
// it could not decode.
const noTag = 0xFFFF

// conn is the framing layer between a guest connection and the 9P
// server. The server library decodes and dispatches; this layer makes
// what a hostile guest can cost bounded before a message reaches it:
//
//   - every message is read whole into one buffer of at most Msize bytes;
//     a larger or shorter one ends the connection;
//   - Tversion's msize is lowered to Msize, and Tread's and Treaddir's
//     counts to what fits in one reply, so no reply buffer exceeds it;
//   - at most Requests requests are in flight: the next is not read until
//     one is answered, and a request reusing a tag in flight is dropped
//     (the library would drop it too, but silently hold its slot);
//   - extended attributes are answered here (ENODATA, EOPNOTSUPP): the
//     library would buffer a Txattrcreate's declared size, which the
//     guest chooses, and open a fid per Txattrwalk outside the count of
//     files.
type conn struct {
	rw    io.ReadWriteCloser
	lim   Limits
	log   *slog.Logger
	slots chan struct{}

	tagMu    sync.Mutex
	inflight map[uint16]bool

	// undecodable is set when the library answered a message it could
	// not decode; the connection ends.
	undecodable atomic.Bool

	// wmu is held from the first byte of a reply to its last, so that
	// the replies this layer writes itself never split one.
	wmu sync.Mutex
	w   *bufio.Writer
}

func newConn(rw io.ReadWriteCloser, lim Limits, log *slog.Logger) *conn {
	return &conn{
		rw: rw, lim: lim, log: log,
		slots:    make(chan struct{}, lim.Requests),
		inflight: map[uint16]bool{},
		w:        bufio.NewWriterSize(rw, 64<<10),
	}
}

func (c *conn) serve(ctx context.Context, srv *p9.Server) error {
	pr, pw := io.Pipe()
	go srv.Handle(pr, &replyWriter{c: c})
	stop := context.AfterFunc(ctx, func() { c.rw.Close() })
	err := c.readLoop(ctx, pw)
	stop()
	// At the end of the guest's input the requests in flight are still
	// answered; after an error or cancellation their replies are dropped
	// (a closed connection fails at once). Either way the wait is
	// bounded.
	if c.undecodable.Load() {
		return errors.New("9P: the guest sent a message that could not be decoded")
	}
	if err != nil || ctx.Err() != nil {
		c.rw.Close()
	}
	for deadline := time.Now().Add(drainTimeout); len(c.slots) > 0 && time.Now().Before(deadline) && !c.undecodable.Load(); {
		time.Sleep(5 * time.Millisecond)
	}
	c.rw.Close()
	if c.undecodable.Load() {
		return errors.New("9P: the guest sent a message that could not be decoded")
	}
	// The library's side of the connection is left waiting on pr, never
	// ended: its teardown (p9 v0.3.0, Server.Handle) waits on a
	// WaitGroup that the goroutines it spawns may still add to, which
	// can panic the process. What it holds open on the host is released
	// by Server.Close.
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// drainTimeout bounds the wait for requests in flight when a connection
// ends.
const drainTimeout = 10 * time.Second

// readLoop reads the guest's messages and hands them to the library
// through w until the connection ends.
func (c *conn) readLoop(ctx context.Context, w io.Writer) error {
	r := bufio.NewReaderSize(c.rw, 64<<10)
	buf := make([]byte, c.lim.Msize)
	for {
		if _, err := io.ReadFull(r, buf[:headerLen]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || isClosed(err) {
				return nil
			}
			return err
		}
		size := binary.LittleEndian.Uint32(buf[0:4])
		typ := buf[4]
		tag := binary.LittleEndian.Uint16(buf[5:7])
		if size < headerLen || size > c.lim.Msize {
			return fmt.Errorf("9P: the guest sent a message of %d bytes; at most %d are allowed", size, c.lim.Msize)
		}
		msg := buf[:size]
		if _, err := io.ReadFull(r, msg[headerLen:]); err != nil {
			return fmt.Errorf("9P: truncated message: %w", err)
		}
		body := msg[headerLen:]
		switch typ {
		case msgTversion:
			if len(body) >= 4 && binary.LittleEndian.Uint32(body) > c.lim.Msize {
				binary.LittleEndian.PutUint32(body, c.lim.Msize)
			}
		case msgTread, msgTreaddir:
			// fid[4] offset[8] count[4]; a reply is header, count[4], data.
			if len(body) >= 16 {
				limit := c.lim.Msize - headerLen - 4
				if binary.LittleEndian.Uint32(body[12:16]) > limit {
					binary.LittleEndian.PutUint32(body[12:16], limit)
				}
			}
		case msgTxattrwalk, msgTxattrcreate:
			errno := unix.EOPNOTSUPP
			// Txattrwalk: fid[4] newfid[4] name[s]; a named attribute
			// is simply absent (exec asks for security.capability).
			if typ == msgTxattrwalk && len(body) >= 10 && binary.LittleEndian.Uint16(body[8:10]) > 0 {
				errno = unix.ENODATA
			}
			if err := c.answer(tag, errno); err != nil {
				return err
			}
			continue
		}
		if !c.take(tag) {
			c.log.Debug("9P: dropped a request whose tag is in flight", "tag", tag)
			continue
		}
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		if _, err := w.Write(msg); err != nil {
			return nil
		}
	}
}

// take marks tag in flight, or reports that it already is.
func (c *conn) take(tag uint16) bool {
	c.tagMu.Lock()
	defer c.tagMu.Unlock()
	if c.inflight[tag] {
		return false
	}
	c.inflight[tag] = true
	return true
}

// untag frees tag and reports whether it was in flight (and so holds
// a slot).
func (c *conn) untag(tag uint16) bool {
	c.tagMu.Lock()
	defer c.tagMu.Unlock()
	ok := c.inflight[tag]
	delete(c.inflight, tag)
	return ok
}

// answer writes an Rlerror for tag, unless tag is in flight.
func (c *conn) answer(tag uint16, errno unix.Errno) error {
	c.tagMu.Lock()
	busy := c.inflight[tag]
	c.tagMu.Unlock()
	if busy {
		return nil
	}
	var m [headerLen + 4]byte
	binary.LittleEndian.PutUint32(m[0:4], uint32(len(m)))
	m[4] = msgRlerror
	binary.LittleEndian.PutUint16(m[5:7], tag)
	binary.LittleEndian.PutUint32(m[7:11], uint32(errno))
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.w.Write(m[:]); err != nil {
		return err
	}
	return c.w.Flush()
}

// replyWriter receives the library's replies, which it writes in pieces
// (header, body, payload) but one reply at a time, and passes them on
// whole.
type replyWriter struct {
	c      *conn
	hdr    [headerLen]byte
	nhdr   int
	left   uint32
	held   bool  // the reply being written holds a slot
	broken error // the connection failed; later replies are dropped
}

func (w *replyWriter) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		if w.nhdr == 0 {
			w.c.wmu.Lock()
		}
		var k int
		if w.nhdr < headerLen {
			k = copy(w.hdr[w.nhdr:], p)
			w.nhdr += k
			if w.nhdr == headerLen {
				size := binary.LittleEndian.Uint32(w.hdr[0:4])
				if size < headerLen {
					size = headerLen
					w.broken = errors.New("9P: reply shorter than its header")
				}
				w.left = size - headerLen
				// The tag is free once its reply is begun: the library
				// has forgotten it already, and the guest may reuse it
				// the moment it has read the reply, which can be before
				// the reply's last Write returns.
				tag := binary.LittleEndian.Uint16(w.hdr[5:7])
				w.held = w.c.untag(tag)
				if !w.held && tag == noTag && w.hdr[4] == msgRlerror {
					// The library's answer to a message it could
					// not decode: it cannot say which request that
					// was, so the connection ends rather than hold
					// a slot and a tag forever.
					w.c.undecodable.Store(true)
					w.c.rw.Close()
				}
			}
		} else {
			k = len(p)
			if uint32(k) > w.left {
				k = int(w.left)
			}
			w.left -= uint32(k)
		}
		// Once the connection is broken, replies are still followed
		// frame by frame (and dropped) so that their slots are freed.
		if w.broken == nil {
			if _, err := w.c.w.Write(p[:k]); err != nil {
				w.broken = err
			}
		}
		p = p[k:]
		if w.nhdr == headerLen && w.left == 0 {
			// The slot is free once the reply has gone, so that a
			// guest that does not read its replies keeps its requests
			// in flight.
			held := w.held
			w.held = false
			if w.broken == nil {
				if err := w.c.w.Flush(); err != nil {
					w.broken = err
				}
			}
			w.nhdr = 0
			w.c.wmu.Unlock()
			if held {
				<-w.c.slots
			}
		}
	}
	// Errors are not returned: the library would abandon the reply
	// half-written, and its slot with it. A broken connection's replies
	// are counted and dropped instead.
	return total, nil
}

// Close implements io.Closer for the library, which closes its writer
// when a connection ends.
func (w *replyWriter) Close() error { return w.c.rw.Close() }

func isClosed(err error) bool {
	return errors.Is(err, io.ErrClosedPipe) || errors.Is(err, unix.EBADF) ||
		errors.Is(err, unix.ECONNRESET) || errors.Is(err, net.ErrClosed)
}
