package agentproto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// InitialWindow is the credit each channel of a session starts with, in
// bytes: the most a receiver ever buffers for that channel.
const InitialWindow = 256 << 10

// maxCredit bounds a sender's credit, so a peer cannot make it overflow.
const maxCredit = 1 << 30

// ErrWindow is the error of a receiver whose sender overran its credit.
var ErrWindow = errors.New("agentproto: peer sent more data than its credit allows")

// Credit is a sender's count of the bytes it may still send on one
// channel. It starts at InitialWindow; Add returns what the receiver
// grants. One goroutine sends (Wait, then Spend); any goroutine may Add
// or Close.
type Credit struct {
	mu   sync.Mutex
	n    int64
	err  error
	wake chan struct{}
}

// NewCredit returns a credit of InitialWindow bytes.
func NewCredit() *Credit {
	return &Credit{n: InitialWindow, wake: make(chan struct{}, 1)}
}

// Add adds n bytes of credit, from a TypeWindow frame.
func (c *Credit) Add(n uint32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n+int64(n) > maxCredit {
		return fmt.Errorf("agentproto: window grows credit past %d bytes", maxCredit)
	}
	c.n += int64(n)
	c.signal()
	return nil
}

func (c *Credit) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Wait blocks until there is credit and returns how much, or until ctx
// ends or Close is called.
func (c *Credit) Wait(ctx context.Context) (int, error) {
	for {
		c.mu.Lock()
		n, err := c.n, c.err
		c.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if n > 0 {
			return int(min(n, maxCredit)), nil
		}
		select {
		case <-c.wake:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Spend records that n bytes, at most what Wait returned, were sent.
func (c *Credit) Spend(n int) {
	c.mu.Lock()
	c.n -= int64(n)
	c.mu.Unlock()
}

// Close makes Wait return err, now and from then on.
func (c *Credit) Close(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
	c.signal()
}

// Inbox is a receiver's buffer for one channel. The demultiplexing loop
// pushes what arrives and never blocks; one consumer reads. As the
// consumer drains it, the inbox returns credit to the sender through its
// grant function, in batches of a quarter window, so the sender never
// waits for credit the receiver could give and the inbox never holds more
// than InitialWindow bytes.
type Inbox struct {
	grant func(n uint32)

	mu       sync.Mutex
	chunks   [][]byte
	buffered int // bytes in chunks
	pending  int // bytes consumed but not yet granted
	high     int
	closed   bool
	err      error // the reader's error once closed: io.EOF or the writer's
	aborted  error
	wake     chan struct{}
}

// NewInbox returns an empty inbox that returns credit through grant.
// grant is called without locks held, from the consumer's goroutine (or
// the pushing one, after Abort).
func NewInbox(grant func(n uint32)) *Inbox {
	return &Inbox{grant: grant, wake: make(chan struct{}, 1)}
}

// Push appends data that arrived. It fails with ErrWindow when the sender
// overran its credit. After Abort, the data are dropped and their credit
// returned at once.
func (b *Inbox) Push(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	b.mu.Lock()
	if b.buffered+b.pending+len(p) > InitialWindow {
		b.mu.Unlock()
		return ErrWindow
	}
	if b.aborted != nil || b.closed {
		b.pending += len(p)
		g := b.takeGrant(true)
		b.mu.Unlock()
		b.give(g)
		return nil
	}
	b.chunks = append(b.chunks, p)
	b.buffered += len(p)
	b.high = max(b.high, b.buffered)
	b.mu.Unlock()
	b.signal()
	return nil
}

// CloseWrite says no more data will come: the reader gets what is
// buffered and then err, or io.EOF when err is nil.
func (b *Inbox) CloseWrite(err error) {
	if err == nil {
		err = io.EOF
	}
	b.mu.Lock()
	if !b.closed {
		b.closed, b.err = true, err
	}
	b.mu.Unlock()
	b.signal()
}

// Abort is the consumer giving up: buffered data are dropped, their
// credit and that of everything still to come is returned, and reads fail
// with err.
func (b *Inbox) Abort(err error) {
	b.mu.Lock()
	if b.aborted == nil {
		b.aborted = err
	}
	b.pending += b.buffered
	b.chunks, b.buffered = nil, 0
	g := b.takeGrant(true)
	b.mu.Unlock()
	b.give(g)
	b.signal()
}

// HighWater returns the most bytes the inbox has held at once.
func (b *Inbox) HighWater() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.high
}

func (b *Inbox) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// takeGrant returns the credit to give now and resets pending; with mu
// held.
func (b *Inbox) takeGrant(force bool) int {
	if b.pending == 0 || (!force && b.pending < InitialWindow/4) {
		return 0
	}
	g := b.pending
	b.pending = 0
	return g
}

func (b *Inbox) give(n int) {
	if n > 0 && b.grant != nil {
		b.grant(uint32(n))
	}
}

// head waits for the first chunk; with mu not held.
func (b *Inbox) head() ([]byte, error) {
	for {
		b.mu.Lock()
		if b.aborted != nil {
			err := b.aborted
			b.mu.Unlock()
			return nil, err
		}
		if len(b.chunks) > 0 {
			c := b.chunks[0]
			b.mu.Unlock()
			return c, nil
		}
		if b.closed {
			err := b.err
			b.mu.Unlock()
			return nil, err
		}
		b.mu.Unlock()
		<-b.wake
	}
}

// consume drops n bytes from the first chunk and returns credit when a
// batch is due.
func (b *Inbox) consume(n int) {
	b.mu.Lock()
	if b.aborted != nil || len(b.chunks) == 0 {
		b.mu.Unlock()
		return
	}
	if n == len(b.chunks[0]) {
		b.chunks[0] = nil
		b.chunks = b.chunks[1:]
	} else {
		b.chunks[0] = b.chunks[0][n:]
	}
	b.buffered -= n
	b.pending += n
	g := b.takeGrant(false)
	b.mu.Unlock()
	b.give(g)
}

// Read reads buffered data, waiting for some when there is none.
func (b *Inbox) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c, err := b.head()
	if err != nil {
		return 0, err
	}
	n := copy(p, c)
	b.consume(n)
	return n, nil
}

// WriteTo writes everything that arrives to w until the writer side
// closes. It returns nil after io.EOF, like io.Copy.
func (b *Inbox) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		c, err := b.head()
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return total, err
		}
		n, werr := w.Write(c)
		total += int64(n)
		if werr == nil && n < len(c) {
			werr = io.ErrShortWrite
		}
		b.consume(len(c))
		if werr != nil {
			return total, werr
		}
	}
}
