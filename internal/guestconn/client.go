package guestconn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

// ErrClosed is the error of calls on a connection that has ended; the
// error they return wraps it and says why the connection ended.
var ErrClosed = errors.New("guestconn: connection closed")

// Software names this side in its hello.
const Software = "sbx"

// CancelGrace is how long a guest has to end a session once the host
// canceled it (its context ended): a process killed, a transfer dropped,
// a ping answered. A guest that takes longer is broken or hostile, and
// the connection is closed, which ends every call still waiting on it.
const CancelGrace = 10 * time.Second

// HelloTimeout bounds Dial's wait for the guest's hello.
const HelloTimeout = time.Minute

// Client is a connection to a guest's command server.
type Client struct {
	conn  *agentproto.Conn
	hello agentproto.Hello

	mu      sync.Mutex
	next    uint32
	streams map[uint32]stream
	pings   map[uint64]chan struct{}
	pingSeq uint64
	err     error // why the connection ended, once it has
	done    chan struct{}

	grace time.Duration // CancelGrace; shorter in tests
}

// stream is one open session: its grammar, which checks the guest's
// frames before its handler sees them, and the handler.
type stream struct {
	grammar *agentproto.Session
	h       handler
}

// handler receives the frames of one session.
type handler interface {
	// handle takes a frame; an error means the guest broke the
	// protocol and ends the connection.
	handle(f agentproto.Frame) error
	// fail ends the session because the connection ended.
	fail(err error)
}

// Dial opens a connection over conn, which the Client owns from then on:
// it negotiates the protocol version and learns the guest's capabilities.
// It gives up (and closes conn) when the guest has not answered within
// HelloTimeout.
func Dial(conn io.ReadWriteCloser) (*Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), HelloTimeout)
	defer cancel()
	return DialContext(ctx, conn)
}

// DialContext is Dial, waiting for the guest's hello until ctx ends (a
// guest that is still booting answers once its agent serves), then
// giving up and closing conn.
func DialContext(ctx context.Context, conn io.ReadWriteCloser) (*Client, error) {
	c := &Client{
		conn:    agentproto.NewConn(conn),
		next:    1,
		streams: map[uint32]stream{},
		pings:   map[uint64]chan struct{}{},
		done:    make(chan struct{}),
		grace:   CancelGrace,
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	h, err := c.handshake()
	if !stop() {
		conn.Close()
		return nil, fmt.Errorf("guestconn: hello: %w", ctx.Err())
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.hello = h
	go c.loop()
	return c, nil
}

// ErrRefused is what DialContext's error matches (errors.Is) when the
// guest answered the hello with an error: it serves, but not this
// connection.
var ErrRefused = errors.New("guestconn: the guest refused the connection")

func (c *Client) handshake() (agentproto.Hello, error) {
	err := c.conn.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Versions: agentproto.Versions, Software: Software})
	if err != nil {
		return agentproto.Hello{}, fmt.Errorf("guestconn: hello: %w", err)
	}
	f, err := c.conn.ReadFrame()
	if err != nil {
		return agentproto.Hello{}, fmt.Errorf("guestconn: waiting for the guest's hello: %w", err)
	}
	switch {
	case f.Type == agentproto.TypeError && f.Stream == 0:
		var e agentproto.Error
		if err := agentproto.ParseJSON(f.Type, f.Payload, &e); err != nil {
			return agentproto.Hello{}, err
		}
		return agentproto.Hello{}, fmt.Errorf("%w: %w", ErrRefused, &e)
	case f.Type != agentproto.TypeHello || f.Stream != 0:
		return agentproto.Hello{}, fmt.Errorf("guestconn: the guest answered the hello with %s on stream %d", f.Type, f.Stream)
	}
	var h agentproto.Hello
	if err := agentproto.ParseJSON(f.Type, f.Payload, &h); err != nil {
		return agentproto.Hello{}, err
	}
	if _, ok := agentproto.Negotiate(agentproto.Versions, []int{h.Version}); !ok {
		return agentproto.Hello{}, fmt.Errorf("guestconn: the guest chose protocol version %d, which this side does not speak (%v)", h.Version, agentproto.Versions)
	}
	return h, nil
}

// Guest returns the guest's hello: the protocol version in use, the
// agent's software and its capabilities.
func (c *Client) Guest() agentproto.Hello { return c.hello }

// Close ends the connection. Calls in progress fail with ErrClosed; the
// guest kills the processes it ran for this connection.
func (c *Client) Close() error {
	c.shutdown(ErrClosed)
	return nil
}

// Done is closed when the connection has ended; Err says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, or nil while it lasts.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *Client) shutdown(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	if !errors.Is(err, ErrClosed) {
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	c.err = err
	streams := c.streams
	c.streams = map[uint32]stream{}
	c.pings = map[uint64]chan struct{}{}
	close(c.done)
	c.mu.Unlock()
	c.conn.Close()
	for _, st := range streams {
		st.h.fail(err)
	}
}

func (c *Client) loop() {
	c.shutdown(guestClosed(c.conn.Dispatch(c.dispatch)))
}

// guestClosed names the guest as the end that closed the connection.
func guestClosed(err error) error {
	if errors.Is(err, agentproto.ErrPeerClosed) {
		return errors.New("the guest closed the connection")
	}
	return err
}

func (c *Client) dispatch(f agentproto.Frame) error {
	if f.Stream == 0 {
		switch f.Type {
		case agentproto.TypePong:
			if len(f.Payload) != 8 {
				return nil
			}
			seq := binary.BigEndian.Uint64(f.Payload)
			c.mu.Lock()
			ch := c.pings[seq]
			delete(c.pings, seq)
			c.mu.Unlock()
			if ch != nil {
				close(ch)
			}
			return nil
		case agentproto.TypeError:
			var e agentproto.Error
			if err := agentproto.ParseJSON(f.Type, f.Payload, &e); err != nil {
				return err
			}
			return fmt.Errorf("the guest ended the connection: %w", &e)
		}
		return nil
	}
	c.mu.Lock()
	st, ok := c.streams[f.Stream]
	c.mu.Unlock()
	if !ok {
		return nil // a frame crossing the session's end
	}
	// Only this loop reads the grammar once the session is open.
	if _, err := st.grammar.Guest(f); err != nil {
		return fmt.Errorf("guest broke the protocol: %w", err)
	}
	if err := st.h.handle(f); err != nil {
		return fmt.Errorf("guest broke the protocol on stream %d: %w", f.Stream, err)
	}
	return nil
}

// open registers a session and sends its request. setup, when not nil,
// learns the session's stream id before any frame can arrive for it.
func (c *Client) open(h handler, t agentproto.Type, req any, setup func(id uint32)) (uint32, error) {
	exec, _ := req.(*agentproto.Exec)
	grammar, err := agentproto.NewSession(t, exec)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	id := c.next
	if id == 0 {
		c.mu.Unlock()
		return 0, errors.New("guestconn: stream ids exhausted on this connection")
	}
	c.next++
	if setup != nil {
		setup(id)
	}
	c.streams[id] = stream{grammar: grammar, h: h}
	c.mu.Unlock()
	if err := c.conn.WriteJSON(t, id, req); err != nil {
		c.shutdown(err)
		return 0, c.Err()
	}
	return id, nil
}

func (c *Client) remove(id uint32) {
	c.mu.Lock()
	delete(c.streams, id)
	c.mu.Unlock()
}

// Ping checks that the guest answers and returns the round-trip time.
func (c *Client) Ping(ctx context.Context) (time.Duration, error) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	c.pingSeq++
	seq := c.pingSeq
	ch := make(chan struct{})
	c.pings[seq] = ch
	c.mu.Unlock()
	// The write itself may block on a guest that does not read.
	defer c.watch(ctx, ch, "ping", nil)()
	start := time.Now()
	if err := c.conn.WriteFrame(agentproto.TypePing, 0, binary.BigEndian.AppendUint64(nil, seq)); err != nil {
		c.shutdown(err)
		return 0, c.Err()
	}
	select {
	case <-ch:
		return time.Since(start), nil
	case <-c.done:
		return 0, c.Err()
	case <-ctx.Done():
		// The entry stays: a late pong still closes ch, and one that
		// never comes ends the connection (watch).
		return 0, fmt.Errorf("guestconn: ping: %w", ctx.Err())
	}
}

// sendStream copies r to a session's ChanStdin as credit allows, then
// sends EOF. It returns r's error, or the credit's when the session ends
// first.
func (c *Client) sendStream(ctx context.Context, id uint32, credit *agentproto.Credit, r io.Reader) error {
	buf := make([]byte, agentproto.MaxData)
	for {
		n, err := credit.Wait(ctx)
		if err != nil {
			return err
		}
		m, rerr := r.Read(buf[:min(n, len(buf))])
		if m > 0 {
			credit.Spend(m)
			if err := c.conn.WriteData(id, agentproto.ChanStdin, buf[:m]); err != nil {
				c.shutdown(err)
				return c.Err()
			}
		}
		if rerr == io.EOF {
			return c.conn.WriteEOF(id, agentproto.ChanStdin)
		}
		if rerr != nil {
			return rerr
		}
	}
}

// watch bounds the wait of a call on a guest that stops answering. When
// ctx ends before done is closed, cancel (when not nil) runs in a
// goroutine of its own, since a write to a guest that does not read
// blocks; when done is still open CancelGrace later, the connection is
// closed with an error naming what, which ends every wait and every
// blocked write on it. release, called when the call returns, disarms
// the watch unless ctx has ended: a call that returns because ctx ended
// leaves the watch to end a session the guest keeps open.
func (c *Client) watch(ctx context.Context, done <-chan struct{}, what string, cancel func()) (release func()) {
	stop := context.AfterFunc(ctx, func() {
		select {
		case <-done:
			return
		default:
		}
		if cancel != nil {
			go cancel()
		}
		c.expect(done, what)
	})
	return func() {
		if ctx.Err() == nil {
			stop()
		}
	}
}

// expect waits for done after a session was canceled for a reason of
// this side's own: at most CancelGrace, then the connection is closed.
func (c *Client) expect(done <-chan struct{}, what string) {
	t := time.NewTimer(c.grace)
	defer t.Stop()
	select {
	case <-done:
	case <-c.done:
	case <-t.C:
		c.shutdown(fmt.Errorf("the guest did not end %s within %v of its cancel", what, c.grace))
	}
}

// cancelStream asks the guest to end session id.
func (c *Client) cancelStream(id uint32) {
	c.conn.WriteFrame(agentproto.TypeCancel, id)
}

func (c *Client) grant(id uint32, ch agentproto.Channel) func(uint32) {
	return func(n uint32) { c.conn.WriteWindow(id, ch, n) }
}
