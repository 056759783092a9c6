package router

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
	"strings"
	"sync"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

// Software names the router in its hello to the guest.
const Software = "sbx-supervisor"

// ErrClosed is the error of a router whose guest connection has ended;
// the error Err returns wraps it and says why.
var ErrClosed = errors.New("supervisor: guest connection closed")

// ErrGuestProtocol is wrapped by the error of a router whose guest broke
// the agent protocol (see Router for what the router checks).
var ErrGuestProtocol = errors.New("the guest broke the agent protocol")

func guestErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrGuestProtocol, fmt.Sprintf(format, args...))
}

// helloTimeout bounds how long a client may take to send its hello.
const helloTimeout = 10 * time.Second

// maxGuestControl is the largest control payload (Started, Exit,
// FileInfo, Result, Error) the router passes on from the guest as it
// came. They are small JSON objects whose longest field is an error
// message naming a path or two, which a client's request can make long
// (a path of a megabyte); a larger one is passed on re-encoded from the
// fields this version knows, its strings cut to maxGuestMessage bytes
// (an error code or signal name to 256), which keeps it under this bound
// whatever JSON escaping does. So a hostile guest cannot fill a client's
// queue with megabyte-sized control frames.
const maxGuestControl = 64 << 10

// maxGuestMessage is the longest error message kept in a control payload
// over maxGuestControl bytes.
const maxGuestMessage = 8 << 10

// maxPendingPings is how many of a client's pings the router keeps while
// the guest has not answered them; past it, the oldest is forgotten and
// never answered.
const maxPendingPings = 64

// Options configure New.
type Options struct {
	// Logger receives client connections, disconnections and protocol
	// errors; nil discards them.
	Logger *slog.Logger
}

// Router multiplexes the sessions of many agent-protocol clients onto the
// one connection to the guest agent. Each client speaks package
// internal/proto/agentproto exactly as it would to the guest (so guestconn.Dial
// works on a connection to the router); the router answers the client's
// hello with the guest's, gives every session opened by a client a stream
// id of its own on the guest connection, and rewrites the stream id of
// every frame both ways. It checks each client's frames and credit, so a
// client that breaks the protocol is disconnected without breaking the
// guest connection the others share. When a client goes, the router
// cancels its sessions in the guest.
//
// The order of a session's frames both ways is agentproto.Session's,
// which the guest server and guestconn check too; the router adds the
// credit each channel has on both of its sides.
//
// The guest is not trusted either: the router checks each of its frames
// and ends the guest connection (Err wraps ErrGuestProtocol; the
// supervisor then stops the sandbox) when one breaks the protocol:
//   - a frame type this version does not know, or one only the host
//     sends (a ping, a hello after the handshake, an exec, a window on
//     stdout…);
//   - a frame for a stream the host has not opened;
//   - data beyond the credit the session's client granted on that
//     channel, data on a channel the session does not have (stderr of a
//     PTY, anything for a file put, stdin), or after that channel's EOF;
//     a second EOF;
//   - Started outside an exec or twice, FileInfo outside a file get or
//     twice, Exit outside an exec, Result outside a file transfer, or a
//     malformed one;
//   - a stdin window that grows the client's credit past InitialWindow,
//     or on a session that takes no stdin;
//   - a pong that is not 8 bytes or answers a ping never sent.
//
// Frames for a stream that has ended, pongs for pings already answered
// or forgotten, empty data frames and zero windows are ignored; a control
// payload over maxGuestControl bytes is cut down (see there). So
// everything the guest can make the router queue for a client is bounded
// per session (see queueBase), and a client that stops reading holds at
// most that; a client whose queue passes its bound anyway, by asking
// without reading, is dropped as if it had disconnected.
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
	// high is the high-water mark of the queues of clients gone.
	high int
}

// session is one exec or file transfer opened by a client.
type session struct {
	gid uint32
	c   *client // nil once the client has gone
	cid uint32
	// grammar is the order of the session's frames, checked both ways.
	grammar *agentproto.Session
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
	pings   []uint64            // sequence numbers of its pending pings, oldest first; guarded by Router.mu
	gone    bool                // guarded by Router.mu
	// configures says the client may send configure requests: only the
	// supervisor itself (ServeConfigurer), never a client of the socket.
	configures bool
}

// New takes over guest, the byte stream to the guest agent's
// command server, says hello on it and returns the router once the guest
// has answered. The router owns guest from then on. ctx bounds the hello
// only.
func New(ctx context.Context, guest io.ReadWriteCloser, opts Options) (*Router, error) {
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
		r.high = max(r.high, c.out.highWater())
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
// in the guest are cancelled. The client may not configure the guest
// (agentproto.Configure): only ServeConfigurer's may.
func (r *Router) ServeConn(conn io.ReadWriteCloser) { r.serveConn(conn, false) }

// ServeConfigurer is ServeConn for the supervisor's own client, which may
// also configure the guest's network, trusted CA and exec defaults
// (agentproto.Configure), as when a reloaded policy adds a secret.
func (r *Router) ServeConfigurer(conn io.ReadWriteCloser) { r.serveConn(conn, true) }

func (r *Router) serveConn(conn io.ReadWriteCloser, configures bool) {
	c := &client{conn: conn, in: agentproto.NewConn(conn), out: newOutQueue(), streams: map[uint32]*session{}, configures: configures}
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
			c.out.push(b) // fails only when the client is being dropped anyway
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
		if c.gone {
			r.mu.Unlock()
			return errQueueClosed
		}
		if len(c.pings) >= maxPendingPings {
			delete(r.pings, c.pings[0])
			c.pings = slices.Delete(c.pings, 0, 1)
		}
		r.pingSeq++
		seq := r.pingSeq
		r.pings[seq] = pingRoute{c: c, payload: f.Payload}
		c.pings = append(c.pings, seq)
		r.mu.Unlock()
		return r.toGuest(agentproto.TypePing, 0, binary.BigEndian.AppendUint64(nil, seq))
	}
	switch f.Type {
	case agentproto.TypeExec, agentproto.TypeFilePut, agentproto.TypeFileGet:
		return r.open(c, f)
	case agentproto.TypeConfigure:
		if !c.configures {
			return r.refuseCode(c, f, agentproto.CodeUnsupported, "only the supervisor configures the guest")
		}
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

// check validates a client frame for the session (agentproto.Session)
// and accounts for its credit. It is called with Router.mu held.
func (s *session) check(f agentproto.Frame) error {
	if err := s.grammar.Host(f); err != nil {
		return clientErrorf("%v", err)
	}
	switch f.Type {
	case agentproto.TypeData:
		_, data, _ := agentproto.ParseData(f.Payload) // checked by Host
		if int64(len(data)) > s.inCredit {
			return clientErrorf("stream %d: %v", f.Stream, agentproto.ErrWindow)
		}
		s.inCredit -= int64(len(data))
	case agentproto.TypeWindow:
		ch, n, _ := agentproto.ParseWindow(f.Payload)
		if s.outRoom[ch]+int64(n) > agentproto.InitialWindow {
			return clientErrorf("stream %d: window grants more %s credit than the bytes received", f.Stream, ch)
		}
		s.outRoom[ch] += int64(n)
	}
	return nil
}

// open starts a session for a client's request frame.
func (r *Router) open(c *client, f agentproto.Frame) error {
	grammar, err := agentproto.OpenSession(f)
	if err != nil {
		return clientErrorf("%v", err)
	}
	s := &session{c: c, cid: f.Stream, grammar: grammar, inCredit: agentproto.InitialWindow}
	for i := range s.outRoom {
		s.outRoom[i] = agentproto.InitialWindow
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
	if c.gone {
		r.mu.Unlock()
		return errQueueClosed
	}
	s.gid = r.next
	r.next++
	c.streams[s.cid] = s
	r.sessions[s.gid] = s
	c.out.opened()
	r.mu.Unlock()
	return r.toGuest(f.Type, s.gid, f.Payload)
}

// refuse ends a session the router cannot open, as the guest would.
func (r *Router) refuse(c *client, f agentproto.Frame, msg string) error {
	return r.refuseCode(c, f, agentproto.CodeBusy, msg)
}

// refuseCode is refuse with an error code of the caller's.
func (r *Router) refuseCode(c *client, f agentproto.Frame, code, msg string) error {
	e := &agentproto.Error{Code: code, Message: msg}
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
	return c.out.push(b)
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
	for _, seq := range c.pings {
		delete(r.pings, seq)
	}
	c.pings = nil
	r.high = max(r.high, c.out.highWater())
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

// dispatch checks one guest frame and routes it; an error ends the guest
// connection.
func (r *Router) dispatch(f agentproto.Frame) error {
	if f.Stream == 0 {
		return r.dispatchConn(f)
	}
	if !f.Type.Known() {
		return guestErrorf("frame of unknown %s on stream %d", f.Type, f.Stream)
	}

	r.mu.Lock()
	s := r.sessions[f.Stream]
	if s == nil {
		opened := r.next == 0 || f.Stream < r.next
		r.mu.Unlock()
		if !opened {
			return guestErrorf("%s frame on stream %d, which the host has not opened", f.Type, f.Stream)
		}
		return nil // a frame crossing the session's end
	}
	fwd, payload, err := s.fromGuest(f)
	if err != nil {
		r.mu.Unlock()
		return err
	}
	end := f.Type == agentproto.TypeExit || f.Type == agentproto.TypeResult
	if end {
		delete(r.sessions, s.gid)
		if s.c != nil {
			delete(s.c.streams, s.cid)
		}
	}
	c, cid := s.c, s.cid
	var ch agentproto.Channel
	var data []byte
	if f.Type == agentproto.TypeData {
		ch, data, _ = agentproto.ParseData(f.Payload) // checked by fromGuest
		if c == nil {
			// Returned to the guest below.
			s.outRoom[ch] += int64(len(data))
		}
	}
	r.mu.Unlock()
	if !fwd {
		return nil
	}

	if c == nil {
		// The client has gone and the session is cancelled: return the
		// credit of its last output so that the guest can end it.
		if len(data) > 0 {
			var p [5]byte
			p[0] = byte(ch)
			binary.BigEndian.PutUint32(p[1:], uint32(len(data)))
			return r.guest.WriteFrame(agentproto.TypeWindow, f.Stream, p[:])
		}
		return nil
	}
	switch f.Type {
	case agentproto.TypeData:
		err = c.out.pushData(cid, ch, data)
	case agentproto.TypeWindow:
		wch, n, _ := agentproto.ParseWindow(f.Payload)
		err = c.out.pushWindow(cid, wch, n)
	default:
		var b []byte
		b, err = agentproto.AppendFrame(make([]byte, 0, agentproto.HeaderSize+len(payload)), f.Type, cid, payload)
		if err != nil {
			return err
		}
		if end {
			err = c.out.pushEnd(b)
		} else {
			err = c.out.push(b)
		}
	}
	if err != nil {
		r.evict(c, err)
	}
	return nil
}

// fromGuest checks a guest frame for the session and accounts for its
// credit; fwd says whether the frame goes on to the client, and payload
// is what it carries there (see maxGuestControl). It is called with
// Router.mu held.
func (s *session) fromGuest(f agentproto.Frame) (fwd bool, payload []byte, err error) {
	fwd, err = s.checkGuest(f)
	if err != nil || !fwd {
		return false, nil, err
	}
	payload = f.Payload
	switch f.Type {
	case agentproto.TypeStarted:
		payload, err = guestControl(f, &agentproto.Started{})
	case agentproto.TypeExit:
		payload, err = guestControl(f, &agentproto.Exit{})
	case agentproto.TypeFileInfo:
		payload, err = guestControl(f, &agentproto.FileInfo{})
	case agentproto.TypeResult:
		payload, err = guestControl(f, &agentproto.Result{})
	}
	return err == nil, payload, err
}

// checkGuest checks the frame's place in the session
// (agentproto.Session) and its credit.
func (s *session) checkGuest(f agentproto.Frame) (fwd bool, err error) {
	if _, err := s.grammar.Guest(f); err != nil {
		return false, guestErrorf("%v", err)
	}
	switch f.Type {
	case agentproto.TypeData:
		ch, data, _ := agentproto.ParseData(f.Payload) // checked by Guest
		if int64(len(data)) > s.outRoom[ch] {
			return false, guestErrorf("stream %d: %d bytes of %s beyond the %d bytes of credit the client granted: %v",
				f.Stream, len(data), ch, s.outRoom[ch], agentproto.ErrWindow)
		}
		s.outRoom[ch] -= int64(len(data))
		return len(data) > 0, nil
	case agentproto.TypeWindow:
		_, n, _ := agentproto.ParseWindow(f.Payload)
		if s.inCredit+int64(n) > agentproto.InitialWindow {
			return false, guestErrorf("stream %d: window grants more stdin credit than the bytes received", f.Stream)
		}
		s.inCredit += int64(n)
		return n > 0, nil
	}
	return true, nil
}

// guestControl decodes a guest control payload into v, a pointer to its
// message, and returns the payload to pass on: the guest's own, or v
// re-encoded with its strings cut short when the payload is larger than
// maxGuestControl.
func guestControl(f agentproto.Frame, v any) ([]byte, error) {
	if err := agentproto.ParseJSON(f.Type, f.Payload, v); err != nil {
		return nil, guestErrorf("stream %d: %v", f.Stream, err)
	}
	if len(f.Payload) <= maxGuestControl {
		return f.Payload, nil
	}
	clipError := func(e *agentproto.Error) {
		if e != nil {
			e.Code = clip(e.Code, 256)
			e.Message = clip(e.Message, maxGuestMessage)
		}
	}
	switch m := v.(type) {
	case *agentproto.Exit:
		m.Signal = clip(m.Signal, 256)
		clipError(m.Error)
	case *agentproto.Result:
		clipError(m.Error)
	case *agentproto.Error:
		clipError(m)
	}
	p, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("supervisor: encoding %s: %w", f.Type, err)
	}
	return p, nil
}

// clip cuts s to at most n bytes and a mark, on a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// dispatchConn checks and routes a guest frame on stream 0.
func (r *Router) dispatchConn(f agentproto.Frame) error {
	switch f.Type {
	case agentproto.TypePong:
		if len(f.Payload) != 8 {
			return guestErrorf("pong of %d bytes; the host's pings carry 8", len(f.Payload))
		}
		seq := binary.BigEndian.Uint64(f.Payload)
		r.mu.Lock()
		if seq == 0 || seq > r.pingSeq {
			r.mu.Unlock()
			return guestErrorf("pong for ping %d, which the host has not sent", seq)
		}
		p, ok := r.pings[seq]
		if ok {
			delete(r.pings, seq)
			if i := slices.Index(p.c.pings, seq); i >= 0 {
				p.c.pings = slices.Delete(p.c.pings, i, i+1)
			}
		}
		r.mu.Unlock()
		if !ok {
			return nil // answered already, or its client has gone
		}
		b, err := agentproto.AppendFrame(nil, agentproto.TypePong, 0, p.payload)
		if err != nil {
			return err
		}
		if err := p.c.out.push(b); err != nil {
			r.evict(p.c, err)
		}
		return nil
	case agentproto.TypeError:
		var e agentproto.Error
		p, err := guestControl(f, &e)
		if err != nil {
			return err
		}
		f.Payload = p
		r.broadcast(f)
		return fmt.Errorf("the guest ended the connection: %w", &e)
	}
	return guestErrorf("%s frame on stream 0", f.Type)
}

// evict drops a client whose queue failed: it went past its bound
// because the client does not read. Its sessions are cancelled as when
// it disconnects.
func (r *Router) evict(c *client, err error) {
	if errors.Is(err, errQueueClosed) {
		return // the client is leaving already
	}
	r.log.Warn("dropping a client", "error", err)
	r.drop(c)
	c.conn.Close()
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

// queueHighWater returns the most bytes any client's outbound queue has
// counted at once.
func (r *Router) queueHighWater() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	high := r.high
	for c := range r.clients {
		high = max(high, c.out.highWater())
	}
	return high
}
