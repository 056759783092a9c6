package qmp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// ErrClosed is returned (wrapped, with the cause) by calls on a client
// whose connection has ended: closed by Close, or by QEMU exiting.
var ErrClosed = errors.New("qmp: connection closed")

// MaxQueuedEvents is how many events a client holds for a reader of
// Events that is not keeping up. Beyond it the newest events are dropped
// and counted (DroppedEvents), so that a client nobody reads events from
// still serves commands.
const MaxQueuedEvents = 1024

// Greeting is what QEMU says when a client connects.
type Greeting struct {
	Version Version `json:"version"`
	// Capabilities are the optional protocol features QEMU offers
	// ("oob"). The client enables none of them.
	Capabilities []string `json:"capabilities"`
}

// Version is QEMU's version as the greeting and query-version give it.
type Version struct {
	QEMU struct {
		Major int `json:"major"`
		Minor int `json:"minor"`
		Micro int `json:"micro"`
	} `json:"qemu"`
	// Package is the distribution's version string, e.g.
	// "Debian 1:7.2+dfsg-7".
	Package string `json:"package"`
}

// String renders the version as "MAJOR.MINOR.MICRO".
func (v Version) String() string {
	return fmt.Sprintf("%d.%d.%d", v.QEMU.Major, v.QEMU.Minor, v.QEMU.Micro)
}

// Event is an asynchronous message from QEMU.
type Event struct {
	// Name is the event's name: "SHUTDOWN", "STOP", "RESUME", ...
	Name string
	// Data is the event's "data" member, or nil when it has none.
	Data json.RawMessage
	// Time is when QEMU emitted the event.
	Time time.Time
}

// Error is an error reply: QEMU ran or refused the command and said why.
type Error struct {
	// Command is the command that failed.
	Command string
	// Class is QEMU's error class: "GenericError", "CommandNotFound",
	// "DeviceNotFound", ...
	Class string
	// Desc is QEMU's human-readable description.
	Desc string
}

func (e *Error) Error() string {
	return fmt.Sprintf("qmp: %s: %s: %s", e.Command, e.Class, e.Desc)
}

// message is any message QEMU sends: a greeting, a reply or an event.
type message struct {
	QMP    *Greeting       `json:"QMP"`
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	ID        json.RawMessage `json:"id"`
	Event     string          `json:"event"`
	Data      json.RawMessage `json:"data"`
	Timestamp *struct {
		Seconds      int64 `json:"seconds"`
		Microseconds int64 `json:"microseconds"`
	} `json:"timestamp"`
}

// command is what the client sends.
type command struct {
	Execute   string `json:"execute"`
	Arguments any    `json:"arguments,omitempty"`
	ID        uint64 `json:"id"`
}

// reply is a reply handed from the reader to the caller waiting for it.
type reply struct {
	ret json.RawMessage
	err *Error
}

// call is one command waiting for its reply.
type call struct {
	command string
	ch      chan reply // buffered, receives exactly one reply
}

// Client is a QMP connection. Its methods may be called from any number of
// goroutines. Close releases it.
type Client struct {
	conn     net.Conn
	greeting Greeting

	wmu sync.Mutex // serializes writes to conn

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*call
	order   []uint64 // ids of pending calls, oldest first
	queue   []Event  // events not yet handed to Events
	dropped uint64
	err     error // why the connection ended; set once

	wake   chan struct{} // the reader queued an event (capacity 1)
	events chan Event
	done   chan struct{} // closed when the connection has ended
	quit   chan struct{} // closed by Close
	once   sync.Once
}

// Dial connects to QEMU's QMP socket at path (a unix socket made by
// "-chardev socket,server=on" and "-mon mode=control") and negotiates
// capabilities. ctx bounds the connection and the negotiation only.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	var conn net.Conn
	var err error
	for {
		conn, err = d.DialContext(ctx, "unix", path)
		// QEMU creates the socket file (bind) a moment before it
		// listens: a refused connection then means "not yet".
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("qmp: %w", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err != nil {
		return nil, fmt.Errorf("qmp: %w", err)
	}
	c, err := NewClient(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w (socket %s)", err, path)
	}
	return c, nil
}

// NewClient reads QEMU's greeting from conn and negotiates capabilities
// (qmp_capabilities, enabling no optional feature). ctx bounds the
// negotiation only. On success the client owns conn; on failure the caller
// still does.
func NewClient(ctx context.Context, conn net.Conn) (*Client, error) {
	dec := json.NewDecoder(conn)
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	if dl, ok := ctx.Deadline(); ok {
		conn.SetReadDeadline(dl)
	}
	var m message
	err := dec.Decode(&m)
	if !stop() {
		return nil, fmt.Errorf("qmp: waiting for the greeting: %w", ctx.Err())
	}
	conn.SetReadDeadline(time.Time{})
	if err != nil {
		return nil, fmt.Errorf("qmp: reading the greeting: %w", err)
	}
	if m.QMP == nil {
		return nil, errors.New("qmp: the peer's first message is not a QMP greeting")
	}
	c := &Client{
		conn:     conn,
		greeting: *m.QMP,
		pending:  make(map[uint64]*call),
		wake:     make(chan struct{}, 1),
		events:   make(chan Event),
		done:     make(chan struct{}),
		quit:     make(chan struct{}),
	}
	go c.read(dec)
	go c.forward()
	if err := c.Execute(ctx, "qmp_capabilities", nil, nil); err != nil {
		c.shutdown(err)
		// The caller keeps conn on failure; shutdown closed it, which
		// is what the caller would do.
		return nil, fmt.Errorf("qmp: negotiating capabilities: %w", err)
	}
	return c, nil
}

// Greeting returns the greeting QEMU sent when the client connected.
func (c *Client) Greeting() Greeting { return c.greeting }

// Execute runs command with args (marshalled to the "arguments" member;
// nil sends none) and unmarshals the reply's "return" member into result
// (nil discards it). An error reply is returned as an *Error. If ctx ends
// first, Execute returns its error at once; the command may still run,
// and its reply, when it comes, is dropped.
//
// QEMU answers "quit" and then closes the connection; Execute returns nil
// when the reply arrived, and an error wrapping ErrClosed when the
// connection ended first.
func (c *Client) Execute(ctx context.Context, command string, args, result any) error {
	return c.execute(ctx, command, args, result, nil)
}

// ExecuteWithFile is Execute, with f's descriptor passed along with the
// command (SCM_RIGHTS), as "getfd" and "add-fd" take one. The client's
// connection must be a unix socket. f stays the caller's to close.
func (c *Client) ExecuteWithFile(ctx context.Context, command string, args, result any, f *os.File) error {
	if _, ok := c.conn.(*net.UnixConn); !ok {
		return fmt.Errorf("qmp: %s: passing a file needs a unix socket", command)
	}
	return c.execute(ctx, command, args, result, f)
}

func (c *Client) execute(ctx context.Context, command string, args, result any, f *os.File) error {
	cl := &call{command: command, ch: make(chan reply, 1)}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("qmp: %s: %w", command, err)
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = cl
	c.order = append(c.order, id)
	c.mu.Unlock()

	if err := c.write(ctx, id, command, args, f); err != nil {
		c.forget(id)
		return err
	}
	select {
	case r := <-cl.ch:
		if r.err != nil {
			return r.err
		}
		if result == nil {
			return nil
		}
		if err := json.Unmarshal(r.ret, result); err != nil {
			return fmt.Errorf("qmp: %s: decoding the reply: %w", command, err)
		}
		return nil
	case <-c.done:
		// The reply may have been delivered just before the end.
		select {
		case r := <-cl.ch:
			if r.err != nil {
				return r.err
			}
			if result != nil {
				if err := json.Unmarshal(r.ret, result); err != nil {
					return fmt.Errorf("qmp: %s: decoding the reply: %w", command, err)
				}
			}
			return nil
		default:
		}
		return fmt.Errorf("qmp: %s: %w", command, c.Err())
	case <-ctx.Done():
		c.forget(id)
		return fmt.Errorf("qmp: %s: %w", command, ctx.Err())
	}
}

// write sends one command. Writes are serialized; ctx bounds the write.
func (c *Client) write(ctx context.Context, id uint64, name string, args any, f *os.File) error {
	b, err := json.Marshal(command{Execute: name, Arguments: args, ID: id})
	if err != nil {
		return fmt.Errorf("qmp: %s: encoding the arguments: %w", name, err)
	}
	b = append(b, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		c.conn.SetWriteDeadline(time.Unix(1, 0))
		close(fired)
	})
	if dl, ok := ctx.Deadline(); ok {
		c.conn.SetWriteDeadline(dl)
	}
	var n int
	if f != nil {
		// The descriptor travels with the command's first byte; QEMU
		// keeps it for the command that reads the same message.
		var oobn int
		n, oobn, err = c.conn.(*net.UnixConn).WriteMsgUnix(b, syscall.UnixRights(int(f.Fd())), nil)
		if err == nil && oobn == 0 {
			err = errors.New("the descriptor was not sent")
		}
	} else {
		n, err = c.conn.Write(b)
	}
	cancelled := !stop()
	if cancelled {
		<-fired // so that its deadline is not set after the reset below
	}
	c.conn.SetWriteDeadline(time.Time{})
	switch {
	case err == nil:
		return nil
	case n == 0 && (cancelled || errors.Is(err, os.ErrDeadlineExceeded)):
		// Nothing was sent: the stream is intact.
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("qmp: %s: %w", name, err)
	default:
		// A failed or partial command leaves the stream unusable.
		c.shutdown(err)
		return fmt.Errorf("qmp: %s: %w", name, err)
	}
}

// forget drops a call that no longer waits for its reply.
func (c *Client) forget(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(id)
}

// remove drops id from the pending calls; c.mu is held.
func (c *Client) remove(id uint64) {
	delete(c.pending, id)
	for i, o := range c.order {
		if o == id {
			c.order = append(c.order[:i], c.order[i+1:]...)
			break
		}
	}
}

// read decodes messages until the connection ends, handing replies to
// their callers and queueing events.
func (c *Client) read(dec *json.Decoder) {
	for {
		var m message
		if err := dec.Decode(&m); err != nil {
			c.shutdown(err)
			return
		}
		switch {
		case m.Event != "":
			c.queueEvent(m)
		case m.Return != nil || m.Error != nil:
			c.deliver(m)
		}
		// Anything else (a second greeting, an unknown message
		// kind) is not ours to interpret.
	}
}

// deliver hands a reply to the call with its id. A reply without an id
// (QEMU sends one when it could not parse a command) goes to the oldest
// pending call, as QMP answers in order. A reply to a call that gave up is
// dropped.
func (c *Client) deliver(m message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var id uint64
	if len(m.ID) > 0 && !bytes.Equal(m.ID, []byte("null")) {
		if err := json.Unmarshal(m.ID, &id); err != nil {
			return // not an id this client sent
		}
	} else if len(c.order) > 0 {
		id = c.order[0]
	}
	cl, ok := c.pending[id]
	if !ok {
		return
	}
	c.remove(id)
	r := reply{ret: m.Return}
	if m.Error != nil {
		r.err = &Error{Command: cl.command, Class: m.Error.Class, Desc: m.Error.Desc}
	}
	cl.ch <- r
}

func (c *Client) queueEvent(m message) {
	ev := Event{Name: m.Event, Data: m.Data}
	if m.Timestamp != nil && m.Timestamp.Seconds >= 0 {
		ev.Time = time.Unix(m.Timestamp.Seconds, m.Timestamp.Microseconds*1000)
	}
	c.mu.Lock()
	if len(c.queue) >= MaxQueuedEvents {
		c.dropped++
	} else {
		c.queue = append(c.queue, ev)
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// forward hands queued events to Events in order. After the connection
// ends it still hands over what was queued (the SHUTDOWN that preceded
// QEMU's exit), then closes Events; Close stops it at once.
func (c *Client) forward() {
	defer close(c.events)
	for {
		c.mu.Lock()
		var ev Event
		have := len(c.queue) > 0
		if have {
			ev = c.queue[0]
			c.queue = c.queue[1:]
		}
		c.mu.Unlock()
		if have {
			select {
			case c.events <- ev:
			case <-c.quit:
				return
			}
			continue
		}
		select {
		case <-c.wake:
		case <-c.done:
			c.mu.Lock()
			empty := len(c.queue) == 0
			c.mu.Unlock()
			if empty {
				return
			}
		case <-c.quit:
			return
		}
	}
}

// Events returns the channel on which QEMU's events arrive, in order. It
// is closed once the connection has ended and every queued event has been
// received, or when Close is called.
func (c *Client) Events() <-chan Event { return c.events }

// DroppedEvents reports how many events were dropped because more than
// MaxQueuedEvents were waiting to be received.
func (c *Client) DroppedEvents() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}

// Done returns a channel that is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended (wrapping ErrClosed), or nil while
// it is open.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection. Pending and later calls fail with an error
// wrapping ErrClosed, and Events is closed without delivering what was
// still queued.
func (c *Client) Close() error {
	c.shutdown(errors.New("closed by the client"))
	c.once.Do(func() { close(c.quit) })
	return nil
}

// shutdown ends the connection for cause, once.
func (c *Client) shutdown(cause error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = fmt.Errorf("%w: %w", ErrClosed, cause)
	c.pending = map[uint64]*call{}
	c.order = nil
	c.mu.Unlock()
	c.conn.Close()
	close(c.done)
}
