package supervisor

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/sbx-dev/sbx/guest/agentproto"
)

// Software names the router in its hello to the guest.
const Software = "sbx-supervisor"

// ErrClosed is the error of a router whose guest connection has ended;
// the error Err returns wraps it and says why.
var ErrClosed = errors.New("supervisor: guest connection closed")

// helloTimeout bounds how long a client may take to send its hello.
const helloTimeout = 10 * time.Second

// RouterOptions configure NewRouter.
type RouterOptions struct {
	// Logger receives client connections, disconnections and protocol
	// errors; nil discards them.
	Logger *slog.Logger
}

// Router multiplexes the sessions of many agent-protocol clients onto the
// one connection to the guest agent. Each client speaks package
// guest/agentproto exactly as it would to the guest (so guestconn.Dial
// works on a connection to the router); the router answers the client's
// hello with the guest's, gives every session opened by a client a stream
// id of its own on the guest connection, and rewrites the stream id of
// every frame both ways. It checks each client's frames and credit, so a
// client that breaks the protocol is disconnected without breaking the
// guest connection the others share. When a client goes, the router
// cancels its sessions in the guest.
type Router struct {
	guest *agentproto.Conn
	hello agentproto.Hello
	log   *slog.Logger

	mu       sync.Mutex
	next     uint32              // the next guest stream id
	sessions map[uint32]*session // by guest stream id
	clients  map[*client]struct{}
	pings    map[uint64]pingRoute
	pingSeq  uint64
	err      error
	done     chan struct{}
}

// session is one exec or file transfer opened by a client.
type session struct {
	gid  uint32
	c    *client // nil once the client has gone
	cid  uint32
	kind agentproto.Type // TypeExec, TypeFilePut or TypeFileGet
	// stdin says the client may send data on ChanStdin.
	stdin bool
	// inCredit is how many stdin bytes the guest will still take.
	inCredit int64
	// outRoom is, per channel, how many bytes the client will still
	// take: InitialWindow less what was sent, plus what it granted.
	outRoom [3]int64
}

// pingRoute is where a guest pong goes back to.
type pingRoute struct {
	c       *client
	payload []byte
}

// client is one connection to the router.
type client struct {
	conn    io.ReadWriteCloser
	in      *agentproto.Conn
	out     *outQueue
	streams map[uint32]*session // by client stream id; guarded by Router.mu
	gone    bool                // guarded by Router.mu
}

// NewRouter takes over guest, the byte stream to the guest agent's
// command server, says hello on it and returns the router once the guest
// has answered. The router owns guest from then on. ctx bounds the hello
// only.
func NewRouter(ctx context.Context, guest io.ReadWriteCloser, opts RouterOptions) (*Router, error) {
	r := &Router{
		guest:    agentproto.NewConn(guest),
		log:      opts.Logger,
		next:     1,
		sessions: map[uint32]*session{},
		clients:  map[*client]struct{}{},
		pings:    map[uint64]pingRoute{},
		done:     make(chan struct{}),
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	stop := context.AfterFunc(ctx, func() { guest.Close() })
	h, err := r.handshake()
	if !stop() {
		guest.Close()
		return nil, fmt.Errorf("supervisor: hello to the guest: %w", ctx.Err())
	}
	if err != nil {
		guest.Close()
		return nil, err
	}
	r.hello = h
	go r.loop()
	return r, nil
}

func (r *Router) handshake() (agentproto.Hello, error) {
	err := r.guest.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Versions: agentproto.Versions, Software: Software})
	if err != nil {
		return agentproto.Hello{}, fmt.Errorf("supervisor: hello to the guest: %w", err)
	}
	f, err := r.guest.ReadFrame()
	if err != nil {
		return agentproto.Hello{}, fmt.Errorf("supervisor: waiting for the guest's hello: %w", err)
	}
	if f.Type == agentproto.TypeError && f.Stream == 0 {
		var e agentproto.Error
		if err := agentproto.ParseJSON(f.Type, f.Payload, &e); err != nil {
			return agentproto.Hello{}, err
		}
		return agentproto.Hello{}, fmt.Errorf("supervisor: the guest refused the connection: %w", &e)
	}
	if f.Type != agentproto.TypeHello || f.Stream != 0 {
		return agentproto.Hello{}, fmt.Errorf("supervisor: the guest answered the hello with %s on stream %d", f.Type, f.Stream)
	}
	var h agentproto.Hello
	if err := agentproto.ParseJSON(f.Type, f.Payload, &h); err != nil {
		return agentproto.Hello{}, err
	}
	if !slices.Contains(agentproto.Versions, h.Version) {
		return agentproto.Hello{}, fmt.Errorf("supervisor: the guest chose protocol version %d, which this side does not speak (%v)", h.Version, agentproto.Versions)
	}
	return h, nil
}

// Guest returns the guest's hello, which the router gives its clients.
func (r *Router) Guest() agentproto.Hello { return r.hello }

// Done is closed once the guest connection has ended; Err says why.
func (r *Router) Done() <-chan struct{} { return r.done }

// Err returns why the guest connection ended, or nil while it lasts.
func (r *Router) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close ends the guest connection and every client's. The guest kills
// the processes it ran for the router.
func (r *Router) Close() error {
	r.shutdown(ErrClosed)
	return nil
}

// Clients returns how many clients are connected.
func (r *Router) Clients() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.clients)
}

func (r *Router) shutdown(err error) {
	r.mu.Lock()
	if r.err != nil {
		r.mu.Unlock()
		return
	}
	if !errors.Is(err, ErrClosed) {
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	r.err = err
	clients := r.clients
	r.clients = map[*client]struct{}{}
	for c := range clients {
		c.gone = true
	}
	r.sessions = map[uint32]*session{}
	r.pings = map[uint64]pingRoute{}
	close(r.done)
	r.mu.Unlock()
	r.guest.Close()
	for c := range clients {
		c.out.close()
	}
}

// Serve accepts clients on l and routes their sessions until l fails or
// the guest connection ends, and then closes l. It returns the guest
// connection's end (wrapping ErrClosed) or l's error.
func (r *Router) Serve(l net.Listener) error {
	stop := context.AfterFunc(doneContext(r.done), func() { l.Close() })
	defer stop()
	for {
		conn, err := l.Accept()
		if err != nil {
			select {
			case <-r.done:
				return r.Err()
			default:
			}
			return fmt.Errorf("supervisor: accepting clients: %w", err)
		}
		go r.ServeConn(conn)
	}
}

// doneContext is a context that ends when done is closed.
func doneContext(done <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-done
		cancel()
	}()
	return ctx
}

// ServeConn serves one client on conn, which it owns and closes, and
// returns once the client has gone. The client's sessions still running
// in the guest are cancelled.
func (r *Router) ServeConn(conn io.ReadWriteCloser) {
	c := &client{conn: conn, in: agentproto.NewConn(conn), out: newOutQueue(), streams: map[uint32]*session{}}
	if err := r.greet(c); err != nil {
		r.log.Info("client refused", "error", err)
		conn.Close()
		return
	}
	r.mu.Lock()
	if r.err != nil {
		r.mu.Unlock()
		c.in.WriteJSON(agentproto.TypeError, 0, &agentproto.Error{Message: r.err.Error()})
		conn.Close()
		return
	}
	r.clients[c] = struct{}{}
	r.mu.Unlock()
	r.log.Debug("client connected")

	// The writer closes conn when it stops: on a failed write, which the
	// reader then sees, or once the queue is closed and flushed.
	written := make(chan struct{})
	go func() {
		defer close(written)
		c.out.writeTo(conn)
		conn.Close()
	}()
	err := r.read(c)
	var pe *clientError
	if errors.As(err, &pe) {
		r.log.Warn("client broke the protocol", "error", err)
		if b, merr := encodeJSON(agentproto.TypeError, 0, &agentproto.Error{Code: agentproto.CodeProtocol, Message: pe.msg}); merr == nil {
			c.out.push(b)
		}
	}
	r.drop(c)
	c.out.close()
	select {
	case <-written:
	case <-time.After(5 * time.Second):
		conn.Close() // a client that does not read its last frames
		<-written
	}
	r.log.Debug("client disconnected", "error", err)
}

// greet answers the client's hello with the guest's.
func (r *Router) greet(c *client) error {
	type deadliner interface{ SetReadDeadline(time.Time) error }
	if d, ok := c.conn.(deadliner); ok {
		d.SetReadDeadline(time.Now().Add(helloTimeout))
		defer d.SetReadDeadline(time.Time{})
	}
	f, err := c.in.ReadFrame()
	if err != nil {
		return fmt.Errorf("reading the client's hello: %w", err)
	}
	refuse := func(msg string) error {
		c.in.WriteJSON(agentproto.TypeError, 0, &agentproto.Error{Code: agentproto.CodeProtocol, Message: msg})
		return errors.New(msg)
	}
	if f.Type != agentproto.TypeHello || f.Stream != 0 {
		return refuse(fmt.Sprintf("the connection must begin with a hello on stream 0, not %s on stream %d", f.Type, f.Stream))
	}
	var h agentproto.Hello
	if err := agentproto.ParseJSON(f.Type, f.Payload, &h); err != nil {
		return refuse(err.Error())
	}
	if !slices.Contains(h.Versions, r.hello.Version) {
		return refuse(fmt.Sprintf("no common protocol version: the client speaks %v, the guest %d", h.Versions, r.hello.Version))
	}
	return c.in.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{
		Version:      r.hello.Version,
		Software:     r.hello.Software,
		Capabilities: r.hello.Capabilities,
	})
}

// clientError is a client breaking the protocol: the router tells it
// and disconnects it.
type clientError struct{ msg string }

func (e *clientError) Error() string { return "supervisor: client protocol error: " + e.msg }

func clientErrorf(format string, args ...any) error {
	return &clientError{msg: fmt.Sprintf(format, args...)}
}

// read routes the client's frames to the guest until the client goes or
// breaks the protocol.
func (r *Router) read(c *client) error {
	for {
		f, err := c.in.ReadFrame()
		if err != nil {
			if errors.Is(err, agentproto.ErrFrameTooLarge) || errors.Is(err, io.ErrUnexpectedEOF) {
				return clientErrorf("%v", err)
			}
			return err
		}
		if err := r.route(c, f); err != nil {
			return err
		}
	}
}

// route checks one client frame and forwards it to the guest.
func (r *Router) route(c *client, f agentproto.Frame) error {
	if f.Stream == 0 {
		if f.Type != agentproto.TypePing {
			return clientErrorf("%s frame on stream 0", f.Type)
		}
		if len(f.Payload) > agentproto.MaxPing {
			return clientErrorf("ping of %d bytes (maximum %d)", len(f.Payload), agentproto.MaxPing)
		}
		r.mu.Lock()
		if r.err != nil {
			r.mu.Unlock()
			return r.Err()
		}
		r.pingSeq++
		seq := r.pingSeq
		r.pings[seq] = pingRoute{c: c, payload: f.Payload}
		r.mu.Unlock()
		return r.toGuest(agentproto.TypePing, 0, binary.BigEndian.AppendUint64(nil, seq))
	}
	switch f.Type {
	case agentproto.TypeExec, agentproto.TypeFilePut, agentproto.TypeFileGet:
		return r.open(c, f)
	}

	r.mu.Lock()
	s := c.streams[f.Stream]
	if s == nil {
		r.mu.Unlock()
		// The session ended while this frame was on its way.
		if !f.Type.Known() {
			return clientErrorf("frame of unknown %s on stream %d", f.Type, f.Stream)
		}
		return nil
	}
	gid := s.gid
	err := s.check(f)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if f.Type == agentproto.TypeCancel {
		f.Payload = nil
	}
	return r.toGuest(f.Type, gid, f.Payload)
}

// check validates a client frame for the session and accounts for its
// credit. It is called with Router.mu held.
func (s *session) check(f agentproto.Frame) error {
	switch f.Type {
	case agentproto.TypeData:
		ch, data, err := agentproto.ParseData(f.Payload)
		if err != nil {
			return clientErrorf("stream %d: %v", f.Stream, err)
		}
		if ch != agentproto.ChanStdin || !s.stdin {
			return clientErrorf("stream %d: data on %s, where the session takes none", f.Stream, ch)
		}
		if int64(len(data)) > s.inCredit {
			return clientErrorf("stream %d: %v", f.Stream, agentproto.ErrWindow)
		}
		s.inCredit -= int64(len(data))
	case agentproto.TypeEOF:
		ch, err := agentproto.ParseEOF(f.Payload)
		if err != nil {
			return clientErrorf("stream %d: %v", f.Stream, err)
		}
		if ch != agentproto.ChanStdin {
			return clientErrorf("stream %d: eof on %s", f.Stream, ch)
		}
	case agentproto.TypeWindow:
		ch, n, err := agentproto.ParseWindow(f.Payload)
		if err != nil {
			return clientErrorf("stream %d: %v", f.Stream, err)
		}
		ok := ch == agentproto.ChanStdout && s.kind != agentproto.TypeFilePut ||
			ch == agentproto.ChanStderr && s.kind == agentproto.TypeExec
		if !ok {
			return clientErrorf("stream %d: window on %s, where the session sends nothing", f.Stream, ch)
		}
		if s.outRoom[ch]+int64(n) > agentproto.InitialWindow {
			return clientErrorf("stream %d: window grants more %s credit than the bytes received", f.Stream, ch)
		}
		s.outRoom[ch] += int64(n)
	case agentproto.TypeSignal, agentproto.TypeResize:
		if s.kind != agentproto.TypeExec {
			return clientErrorf("stream %d: %s frame on a file transfer", f.Stream, f.Type)
		}
		var err error
		if f.Type == agentproto.TypeSignal {
			err = agentproto.ParseJSON(f.Type, f.Payload, &agentproto.Signal{})
		} else {
			err = agentproto.ParseJSON(f.Type, f.Payload, &agentproto.Resize{})
		}
		if err != nil {
			return clientErrorf("stream %d: %v", f.Stream, err)
		}
	case agentproto.TypeCancel:
	default:
		return clientErrorf("stream %d: %s frame from the host side", f.Stream, f.Type)
	}
	return nil
}

// open starts a session for a client's request frame.
func (r *Router) open(c *client, f agentproto.Frame) error {
	s := &session{c: c, cid: f.Stream, kind: f.Type, inCredit: agentproto.InitialWindow}
	for i := range s.outRoom {
		s.outRoom[i] = agentproto.InitialWindow
	}
	var err error
	switch f.Type {
	case agentproto.TypeExec:
		var m agentproto.Exec
		err = agentproto.ParseJSON(f.Type, f.Payload, &m)
		s.stdin = m.Stdin
	case agentproto.TypeFilePut:
		err = agentproto.ParseJSON(f.Type, f.Payload, &agentproto.FilePut{})
		s.stdin = true
	case agentproto.TypeFileGet:
		err = agentproto.ParseJSON(f.Type, f.Payload, &agentproto.FileGet{})
	}
	if err != nil {
		return clientErrorf("stream %d: %v", f.Stream, err)
	}
	r.mu.Lock()
	if r.err != nil {
		r.mu.Unlock()
		return r.Err()
	}
	if c.streams[f.Stream] != nil {
		r.mu.Unlock()
		return clientErrorf("stream %d is already open", f.Stream)
	}
	if r.next == 0 {
		r.mu.Unlock()
		return r.refuse(c, f, "stream ids exhausted on the guest connection")
	}
	s.gid = r.next
	r.next++
	c.streams[s.cid] = s
	r.sessions[s.gid] = s
	r.mu.Unlock()
	return r.toGuest(f.Type, s.gid, f.Payload)
}

// refuse ends a session the router cannot open, as the guest would.
func (r *Router) refuse(c *client, f agentproto.Frame, msg string) error {
	e := &agentproto.Error{Code: agentproto.CodeBusy, Message: msg}
	var (
		b   []byte
		err error
	)
	if f.Type == agentproto.TypeExec {
		b, err = encodeJSON(agentproto.TypeExit, f.Stream, &agentproto.Exit{Code: -1, Error: e})
	} else {
		b, err = encodeJSON(agentproto.TypeResult, f.Stream, &agentproto.Result{Error: e})
	}
	if err != nil {
		return err
	}
	c.out.push(b)
	return nil
}

// toGuest writes a frame to the guest; a failure ends the router.
func (r *Router) toGuest(t agentproto.Type, stream uint32, payload []byte) error {
	if err := r.guest.WriteFrame(t, stream, payload); err != nil {
		r.shutdown(err)
		return r.Err()
	}
	return nil
}

// drop forgets a client that has gone and cancels its sessions in the
// guest. Their guest stream ids stay known until the guest ends them, so
// their last output is drained rather than left waiting for credit.
func (r *Router) drop(c *client) {
	r.mu.Lock()
	if c.gone {
		r.mu.Unlock()
		return
	}
	c.gone = true
	delete(r.clients, c)
	var cancel []uint32
	type grant struct {
		gid uint32
		ch  agentproto.Channel
		n   uint32
	}
	var grants []grant
	for _, s := range c.streams {
		s.c = nil
		cancel = append(cancel, s.gid)
		// What the client received but never granted back is credit
		// the guest may need to drain the session's last output.
		for ch := agentproto.ChanStdout; ch <= agentproto.ChanStderr; ch++ {
			if owed := agentproto.InitialWindow - s.outRoom[ch]; owed > 0 {
				grants = append(grants, grant{s.gid, ch, uint32(owed)})
				s.outRoom[ch] = agentproto.InitialWindow
			}
		}
	}
	c.streams = nil
	for seq, p := range r.pings {
		if p.c == c {
			delete(r.pings, seq)
		}
	}
	r.mu.Unlock()
	slices.Sort(cancel)
	for _, gid := range cancel {
		if r.toGuest(agentproto.TypeCancel, gid, nil) != nil {
			return
		}
	}
	for _, g := range grants {
		var p [5]byte
		p[0] = byte(g.ch)
		binary.BigEndian.PutUint32(p[1:], g.n)
		if r.toGuest(agentproto.TypeWindow, g.gid, p[:]) != nil {
			return
		}
	}
	if len(cancel) > 0 {
		r.log.Info("client gone; cancelled its sessions", "sessions", len(cancel))
	}
}

// loop reads the guest's frames and routes them to the clients until the
// guest connection ends.
func (r *Router) loop() {
	err := r.guest.Dispatch(r.dispatch)
	if errors.Is(err, agentproto.ErrPeerClosed) {
		err = errors.New("the guest closed the connection")
	}
	r.shutdown(err)
}

// dispatch routes one guest frame.
func (r *Router) dispatch(f agentproto.Frame) error {
	if f.Stream == 0 {
		switch f.Type {
		case agentproto.TypePong:
			if len(f.Payload) != 8 {
				return nil
			}
			seq := binary.BigEndian.Uint64(f.Payload)
			r.mu.Lock()
			p, ok := r.pings[seq]
			delete(r.pings, seq)
			r.mu.Unlock()
			if ok {
				b, err := agentproto.AppendFrame(nil, agentproto.TypePong, 0, p.payload)
				if err != nil {
					return err
				}
				p.c.out.push(b)
			}
		case agentproto.TypeError:
			var e agentproto.Error
			if err := agentproto.ParseJSON(f.Type, f.Payload, &e); err != nil {
				return err
			}
			r.broadcast(f)
			return fmt.Errorf("the guest ended the connection: %w", &e)
		}
		return nil
	}

	r.mu.Lock()
	s := r.sessions[f.Stream]
	if s == nil {
		r.mu.Unlock()
		return nil // a frame crossing the session's end
	}
	end := f.Type == agentproto.TypeExit || f.Type == agentproto.TypeResult
	if end {
		delete(r.sessions, s.gid)
		if s.c != nil {
			delete(s.c.streams, s.cid)
		}
	}
	var drained uint32
	var drainCh agentproto.Channel
	switch f.Type {
	case agentproto.TypeData:
		if ch, data, err := agentproto.ParseData(f.Payload); err == nil {
			s.outRoom[ch] -= int64(len(data))
			drainCh, drained = ch, uint32(len(data))
		}
	case agentproto.TypeWindow:
		if ch, n, err := agentproto.ParseWindow(f.Payload); err == nil && ch == agentproto.ChanStdin {
			s.inCredit += int64(n)
		}
	}
	c, cid := s.c, s.cid
	r.mu.Unlock()

	if c == nil {
		// The client has gone and the session is cancelled: return the
		// credit of its last output so that the guest can end it.
		if drained > 0 && !end {
			var p [5]byte
			p[0] = byte(drainCh)
			binary.BigEndian.PutUint32(p[1:], drained)
			return r.guest.WriteFrame(agentproto.TypeWindow, f.Stream, p[:])
		}
		return nil
	}
	b, err := agentproto.AppendFrame(make([]byte, 0, agentproto.HeaderSize+len(f.Payload)), f.Type, cid, f.Payload)
	if err != nil {
		return err
	}
	c.out.push(b)
	return nil
}

// broadcast sends a guest frame on stream 0 to every client.
func (r *Router) broadcast(f agentproto.Frame) {
	b, err := agentproto.AppendFrame(nil, f.Type, 0, f.Payload)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.clients {
		c.out.push(b)
	}
}

// encodeJSON encodes a control frame.
func encodeJSON(t agentproto.Type, stream uint32, v any) ([]byte, error) {
	p, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("supervisor: encoding %s: %w", t, err)
	}
	return agentproto.AppendFrame(nil, t, stream, p)
}

// queueHighWater returns the most bytes any current client's outbound
// queue has held at once.
func (r *Router) queueHighWater() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	high := 0
	for c := range r.clients {
		high = max(high, c.out.highWater())
	}
	return high
}
