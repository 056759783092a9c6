package execsrv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"syscall"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"golang.org/x/sys/unix"
)

// Capabilities are what Serve announces in its hello, with
// agentproto.CapConfigure when Options.Configurer is set.
var Capabilities = []string{agentproto.CapExec, agentproto.CapPTY, agentproto.CapSignal, agentproto.CapUser, agentproto.CapFile}

// Serve speaks the agent protocol (package internal/proto/agentproto) on conn until
// the host closes it, the host breaks the protocol, or ctx ends: it
// answers the host's hello, runs the processes and file transfers the
// host asks for, and streams their data both ways. Serve owns conn and
// closes it. When Serve returns, every process it started has been killed
// (SIGKILL to its process group) and reaped. A host that closes the
// connection is a normal end: Serve returns nil.
func Serve(ctx context.Context, conn io.ReadWriteCloser, opts Options) error {
	if opts.Root == "" {
		opts.Root = "/"
	}
	if opts.Users == nil {
		opts.Users = PasswdFiles{Root: opts.Root}
	}
	if opts.Reaper == nil {
		if os.Getpid() == 1 {
			conn.Close()
			return errors.New("execsrv: as PID 1 the agent must pass the reaper that waits for every child (Options.Reaper)")
		}
		opts.Reaper = ChildWaiter{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.WaitDelay <= 0 {
		opts.WaitDelay = DefaultWaitDelay
	}

	ctx, cancel := context.WithCancel(ctx)
	s := &server{
		ctx:      ctx,
		conn:     agentproto.NewConn(conn),
		opts:     opts,
		log:      opts.Logger,
		sessions: map[uint32]running{},
	}
	stopWatch := context.AfterFunc(ctx, func() { conn.Close() })
	err := s.loop()
	cancel()
	stopWatch()
	conn.Close()
	s.wg.Wait()
	return err
}

// session is one exec or file transfer.
type session interface {
	// handle takes a frame for the session; an error breaks the
	// connection.
	handle(f agentproto.Frame) error
}

// running is a session open: the grammar its host frames are checked
// against before the session sees them, and the session.
type running struct {
	grammar *agentproto.Session
	sess    session
}

type server struct {
	ctx  context.Context
	conn *agentproto.Conn
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	sessions map[uint32]running
	wg       sync.WaitGroup
}

// protocolError breaks the connection: it is reported to the host in a
// TypeError frame and returned by Serve.
type protocolError struct {
	msg      string
	takeover bool // a new client said hello: see ErrTakenOver
}

func (e *protocolError) Error() string { return "execsrv: protocol error: " + e.msg }

func (e *protocolError) Is(target error) bool { return e.takeover && target == ErrTakenOver }

// ErrTakenOver is what Serve's error matches (errors.Is) when the
// connection ended because a new host client said hello on it: the host
// replaced its client while the stream carried on, which is how a
// virtio-serial port looks from the guest. It is an expected end, not a
// fault.
var ErrTakenOver = errors.New("execsrv: a new host client took over the connection")

func protocolf(format string, args ...any) error {
	return &protocolError{msg: fmt.Sprintf(format, args...)}
}

func (s *server) loop() error {
	if err := s.hello(); err != nil {
		return s.fail(err)
	}
	for {
		f, err := s.conn.ReadFrame()
		if err != nil {
			if hostClosed(err) || s.ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, agentproto.ErrFrameTooLarge) || errors.Is(err, io.ErrUnexpectedEOF) {
				return s.fail(protocolf("%v", err))
			}
			return fmt.Errorf("execsrv: reading from the host: %w", err)
		}
		if err := s.dispatch(f); err != nil {
			return s.fail(err)
		}
	}
}

// hostClosed reports whether a read error means the host closed its end,
// abruptly or not: a normal end of the connection.
func hostClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// fail tells the host about a protocol error before the connection closes.
func (s *server) fail(err error) error {
	var pe *protocolError
	if errors.As(err, &pe) {
		s.log.Warn("closing the connection", "error", err)
		s.conn.WriteJSON(agentproto.TypeError, 0, &agentproto.Error{Code: agentproto.CodeProtocol, Message: pe.msg})
	}
	return err
}

func (s *server) hello() error {
	f, err := s.conn.ReadFrame()
	if err != nil {
		if hostClosed(err) {
			return nil
		}
		return fmt.Errorf("execsrv: reading the host's hello: %w", err)
	}
	if f.Type != agentproto.TypeHello || f.Stream != 0 {
		return protocolf("the connection must begin with a hello on stream 0, not %s on stream %d", f.Type, f.Stream)
	}
	var h agentproto.Hello
	if err := agentproto.ParseJSON(f.Type, f.Payload, &h); err != nil {
		return protocolf("%v", err)
	}
	v, ok := agentproto.Negotiate(agentproto.Versions, h.Versions)
	if !ok {
		return protocolf("no common protocol version: the host speaks %v, this agent %v", h.Versions, agentproto.Versions)
	}
	s.log.Debug("hello", "host", h.Software, "version", v)
	return s.conn.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{
		Version:      v,
		Software:     s.opts.Software,
		Capabilities: s.capabilities(),
	})
}

func (s *server) capabilities() []string {
	caps := slices.Clone(Capabilities)
	if s.opts.Configurer != nil {
		caps = append(caps, agentproto.CapConfigure, agentproto.CapIdentity)
	}
	return caps
}

func (s *server) dispatch(f agentproto.Frame) error {
	if f.Stream == 0 {
		switch f.Type {
		case agentproto.TypePing:
			if len(f.Payload) > agentproto.MaxPing {
				return protocolf("ping of %d bytes (maximum %d)", len(f.Payload), agentproto.MaxPing)
			}
			return s.conn.WriteFrame(agentproto.TypePong, 0, f.Payload)
		case agentproto.TypeHello:
			// The host's end of the port was taken over by a new client
			// (the supervisor after the boot's own connection) before
			// this connection saw the old one close. This connection
			// ends; the new client tries again on the next.
			return &protocolError{msg: "a second hello: a new host client took over the port", takeover: true}
		}
		return protocolf("%s frame on stream 0", f.Type)
	}
	if agentproto.Opens(f.Type) {
		return s.open(f)
	}
	s.mu.Lock()
	o, ok := s.sessions[f.Stream]
	s.mu.Unlock()
	if !ok {
		// The session ended while this frame was on its way; or the
		// frame type is one a later version added.
		return nil
	}
	// Only this loop reads the grammar once the session is open.
	if err := o.grammar.Host(f); err != nil {
		return protocolf("%v", err)
	}
	return o.sess.handle(f)
}

// open starts the session a request frame asks for.
func (s *server) open(f agentproto.Frame) error {
	s.mu.Lock()
	_, dup := s.sessions[f.Stream]
	busy := len(s.sessions) >= s.opts.MaxSessions
	s.mu.Unlock()
	if dup {
		return protocolf("stream %d is already open", f.Stream)
	}
	var (
		sess session
		run  func()
		exec *agentproto.Exec
	)
	switch f.Type {
	case agentproto.TypeExec:
		var req agentproto.Exec
		if err := agentproto.ParseJSON(f.Type, f.Payload, &req); err != nil {
			return protocolf("stream %d: %v", f.Stream, err)
		}
		if busy {
			return s.refuse(f, agentproto.TypeExit, &agentproto.Exit{Code: -1, Error: s.busyError()})
		}
		exec = &req
		e := newExecSession(s, f.Stream, req)
		sess, run = e, e.run
	case agentproto.TypeFilePut:
		var req agentproto.FilePut
		if err := agentproto.ParseJSON(f.Type, f.Payload, &req); err != nil {
			return protocolf("stream %d: %v", f.Stream, err)
		}
		if busy {
			return s.refuse(f, agentproto.TypeResult, &agentproto.Result{Error: s.busyError()})
		}
		p := newPutSession(s, f.Stream, req)
		sess, run = p, p.run
	case agentproto.TypeFileGet:
		var req agentproto.FileGet
		if err := agentproto.ParseJSON(f.Type, f.Payload, &req); err != nil {
			return protocolf("stream %d: %v", f.Stream, err)
		}
		if busy {
			return s.refuse(f, agentproto.TypeResult, &agentproto.Result{Error: s.busyError()})
		}
		g := newGetSession(s, f.Stream, req)
		sess, run = g, g.run
	case agentproto.TypeConfigure:
		if busy {
			return s.refuse(f, agentproto.TypeResult, &agentproto.Result{Error: s.busyError()})
		}
		// A request the agent cannot read is answered, not a reason to
		// drop the connection: the host learns what it got wrong.
		c := newConfigureSession(s, f.Stream, f.Payload)
		sess, run = c, c.run
	}
	grammar, err := agentproto.NewSession(f.Type, exec)
	if err != nil {
		return protocolf("stream %d: %v", f.Stream, err)
	}
	s.mu.Lock()
	s.sessions[f.Stream] = running{grammar: grammar, sess: sess}
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.end(f.Stream)
		run()
	}()
	return nil
}

func (s *server) busyError() *agentproto.Error {
	return &agentproto.Error{Code: agentproto.CodeBusy, Message: fmt.Sprintf("the guest already runs %d sessions, its maximum", s.opts.MaxSessions)}
}

func (s *server) refuse(f agentproto.Frame, t agentproto.Type, msg any) error {
	s.log.Warn("refusing a session", "stream", f.Stream, "request", f.Type)
	return s.conn.WriteJSON(t, f.Stream, msg)
}

func (s *server) end(stream uint32) {
	s.mu.Lock()
	delete(s.sessions, stream)
	s.mu.Unlock()
}

// grant returns a function giving the host credit on a channel.
func (s *server) grant(stream uint32, ch agentproto.Channel) func(uint32) {
	return func(n uint32) { s.conn.WriteWindow(stream, ch, n) }
}

// errorOf turns an error into its protocol form: the errno name as code
// when there is one, the message as it is (callers put the guest path in
// it).
func errorOf(err error) *agentproto.Error {
	var pe *agentproto.Error
	if errors.As(err, &pe) {
		return pe
	}
	e := &agentproto.Error{Message: err.Error()}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		e.Code = unix.ErrnoName(errno)
	}
	return e
}
