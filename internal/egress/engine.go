package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/policy"
)

// Options configure an Engine. Zero values take the defaults named.
type Options struct {
	// CA mints the certificates the guest sees for the names it reaches.
	CA *ca.Authority
	// Audit receives one entry per request or connection; nil logs nothing.
	Audit *audit.Writer
	// Upstream bounds and, for tests, redirects the host's own connections.
	Upstream UpstreamOptions
	// Logger receives the engine's own diagnostics; nil discards them.
	Logger *slog.Logger
	// MaxConns bounds the guest's concurrent connections (default 256);
	// past it a connection is refused at once.
	MaxConns int
	// HandshakeTimeout bounds the wait for the guest's first bytes and
	// TLS handshake (default 10 s).
	HandshakeTimeout time.Duration
	// ReadHeaderTimeout bounds the wait for a request's header (default 30 s).
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a guest connection idle between requests
	// (default 2 min).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header block (default 64 KiB).
	MaxHeaderBytes int
	// MaxPushCommands bounds the ref-update commands read from a git
	// push before deciding it (default 1 MiB).
	MaxPushCommands int
	// MaxRefusedPushBody bounds how much of a refused push's pack is read
	// and discarded so the git client gets to read the refusal (default
	// 256 MiB); past it the connection is closed.
	MaxRefusedPushBody int64
}

// UpstreamOptions bound the host's connections to upstream servers.
type UpstreamOptions struct {
	DialTimeout           time.Duration // default 10 s
	TLSHandshakeTimeout   time.Duration // default 10 s
	ResponseHeaderTimeout time.Duration // default 10 min: model APIs think before they answer
	IdleConnTimeout       time.Duration // default 90 s
	// DialContext dials an address the engine has already checked (a
	// hosts mapping's, or a public address the name resolved to);
	// default a net.Dialer.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// LookupNetIP resolves names that no hosts mapping pins; default
	// net.DefaultResolver.LookupNetIP.
	LookupNetIP func(ctx context.Context, network, host string) ([]netip.Addr, error)
}

func (o *Options) defaults() {
	if o.MaxConns <= 0 {
		o.MaxConns = 256
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = 30 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 2 * time.Minute
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = 64 << 10
	}
	if o.MaxPushCommands <= 0 {
		o.MaxPushCommands = 1 << 20
	}
	if o.MaxRefusedPushBody <= 0 {
		o.MaxRefusedPushBody = 256 << 20
	}
	u := &o.Upstream
	if u.DialTimeout <= 0 {
		u.DialTimeout = 10 * time.Second
	}
	if u.TLSHandshakeTimeout <= 0 {
		u.TLSHandshakeTimeout = 10 * time.Second
	}
	if u.ResponseHeaderTimeout <= 0 {
		u.ResponseHeaderTimeout = 10 * time.Minute
	}
	if u.IdleConnTimeout <= 0 {
		u.IdleConnTimeout = 90 * time.Second
	}
	if u.DialContext == nil {
		d := &net.Dialer{Timeout: u.DialTimeout, KeepAlive: 30 * time.Second}
		u.DialContext = d.DialContext
	}
	if u.LookupNetIP == nil {
		u.LookupNetIP = net.DefaultResolver.LookupNetIP
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Engine enforces a Policy on the connections a sandbox's guest opens.
// Its methods are safe for concurrent use.
type Engine struct {
	opts  Options
	cur   atomic.Pointer[state]
	sem   chan struct{}
	proxy *httputil.ReverseProxy

	mu    sync.Mutex
	flows map[*flow]struct{}
}

// state is a Policy with the upstream transport made for it (its trust
// pool and hosts mappings); requests keep the state they started with.
type state struct {
	pol       *Policy
	transport *http.Transport
}

// flow is one guest connection being served.
type flow struct {
	name   string
	port   uint16
	kind   flowKind
	cancel context.CancelCauseFunc
}

// NewEngine makes an Engine enforcing p.
func NewEngine(p *Policy, opts Options) (*Engine, error) {
	if p == nil {
		return nil, errors.New("egress: nil policy")
	}
	if opts.CA == nil {
		return nil, errors.New("egress: no CA to mint guest certificates")
	}
	opts.defaults()
	e := &Engine{
		opts:  opts,
		sem:   make(chan struct{}, opts.MaxConns),
		flows: make(map[*flow]struct{}),
	}
	e.cur.Store(e.newState(p))
	e.proxy = &httputil.ReverseProxy{
		Rewrite:        e.rewrite,
		Transport:      roundTripper(e.roundTrip),
		FlushInterval:  -1,
		ModifyResponse: e.modifyResponse,
		ErrorHandler:   e.upstreamError,
		ErrorLog:       log.New(io.Discard, "", 0),
	}
	return e, nil
}

// Policy returns the policy in force.
func (e *Engine) Policy() *Policy { return e.cur.Load().pol }

// Update puts p in force: connections and requests that start from now
// on follow it, and open connections p no longer allows (or would handle
// differently, say spliced instead of inspected) are closed. Requests in
// flight finish under the policy they started with.
func (e *Engine) Update(p *Policy) {
	old := e.cur.Swap(e.newState(p))
	old.transport.CloseIdleConnections()
	e.mu.Lock()
	var closing []*flow
	for f := range e.flows {
		if p.flowKind(f.name, f.port) != f.kind {
			closing = append(closing, f)
		}
	}
	e.mu.Unlock()
	for _, f := range closing {
		f.cancel(errPolicyChanged)
		e.audit(audit.Entry{Proto: f.kind.String(), Name: f.name, Port: f.port, Decision: audit.DecisionDeny,
			Reason: "open connection closed: the updated policy no longer allows it this way"})
	}
}

var errPolicyChanged = errors.New("policy no longer allows this connection")

// Close closes every open connection. The engine stays usable.
func (e *Engine) Close() error {
	e.mu.Lock()
	for f := range e.flows {
		f.cancel(net.ErrClosed)
	}
	e.mu.Unlock()
	e.cur.Load().transport.CloseIdleConnections()
	return nil
}

func (e *Engine) newState(p *Policy) *state {
	return &state{pol: p, transport: e.newTransport(p)}
}

func (e *Engine) audit(en audit.Entry) {
	if e.opts.Audit == nil {
		return
	}
	if en.Time.IsZero() {
		en.Time = time.Now()
	}
	e.opts.Audit.Log(en)
}

func withOrigin(en audit.Entry, o policy.Origin) audit.Entry {
	en.Rule, en.RuleFile, en.RuleLine = o.Block, o.File, o.Line
	return en
}

// ServeFlow serves one TCP connection the guest opened to name:port
// (name is the one behind the synthetic address it dialled). It returns
// when the connection is done and always closes guest. A refused
// connection is closed at once (reset where the connection allows).
func (e *Engine) ServeFlow(ctx context.Context, name string, port uint16, guest net.Conn) {
	defer guest.Close()
	name = canonicalName(name)
	st := e.cur.Load()
	kind := st.pol.flowKind(name, port)
	if kind == kindDeny {
		e.audit(audit.Entry{Proto: "tcp", Name: name, Port: port, Decision: audit.DecisionDeny,
			Reason: fmt.Sprintf("%s:%d is not allowed: no egress allow rule for the host (ports 80 and 443) nor tcp rule for %s:%d", name, port, name, port)})
		reset(guest)
		return
	}
	select {
	case e.sem <- struct{}{}:
		defer func() { <-e.sem }()
	default:
		e.audit(audit.Entry{Proto: "tcp", Name: name, Port: port, Decision: audit.DecisionDeny,
			Reason: fmt.Sprintf("too many connections (the sandbox's limit is %d)", e.opts.MaxConns)})
		reset(guest)
		return
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	f := &flow{name: name, port: port, kind: kind, cancel: cancel}
	e.mu.Lock()
	e.flows[f] = struct{}{}
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.flows, f)
		e.mu.Unlock()
	}()
	stop := context.AfterFunc(ctx, func() { guest.Close() })
	defer stop()

	if kind == kindTCP {
		e.serveTCP(ctx, f, st.pol, guest)
		return
	}
	e.serveWeb(ctx, f, guest)
}

// reset closes c so that the guest sees a reset rather than an orderly
// close, where the connection type allows it.
func reset(c net.Conn) {
	if l, ok := c.(interface{ SetLinger(int) error }); ok {
		_ = l.SetLinger(0)
	}
	c.Close()
}

// peekConn is a connection whose first bytes were read ahead.
type peekConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite half-closes when the underlying connection can, so splices
// pass on an orderly end of stream.
func (c *peekConn) CloseWrite() error { return closeWrite(c.Conn) }

func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// serveWeb serves a connection to port 80 or 443 of an allowed host: TLS
// (recognised by its first byte, whatever the port) is terminated or, for
// passthrough, spliced after its SNI is checked; anything else is served
// as plain HTTP.
func (e *Engine) serveWeb(ctx context.Context, f *flow, guest net.Conn) {
	start := time.Now()
	pc := &peekConn{Conn: guest, r: bufio.NewReaderSize(guest, 4096)}
	_ = guest.SetReadDeadline(start.Add(e.opts.HandshakeTimeout))
	first, err := pc.r.Peek(1)
	if err != nil {
		e.audit(audit.Entry{Proto: "tcp", Name: f.name, Port: f.port, Decision: audit.DecisionDeny,
			Reason: "the guest sent nothing before the handshake timeout"})
		return
	}
	isTLS := first[0] == 0x16 // a TLS handshake record
	if f.kind == kindPassthrough {
		if !isTLS {
			e.audit(audit.Entry{Proto: "tls-passthrough", Name: f.name, Port: f.port, Decision: audit.DecisionDeny,
				Reason: "a passthrough connection must start with a TLS ClientHello"})
			reset(guest)
			return
		}
		e.servePassthrough(ctx, f, pc)
		return
	}
	if !isTLS {
		if f.port == 443 {
			e.audit(audit.Entry{Proto: "https", Name: f.name, Port: f.port, Decision: audit.DecisionDeny,
				Reason: "port 443 takes TLS; the guest sent something else"})
			reset(guest)
			return
		}
		_ = guest.SetReadDeadline(time.Time{})
		e.serveHTTP(ctx, f, pc, false)
		return
	}
	var sniErr error
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			// A ClientHello without SNI still reached this name through its
			// synthetic address, so it gets the name's certificate; every
			// request's Host is checked against the name all the same.
			if hi.ServerName != "" && canonicalName(hi.ServerName) != f.name {
				sniErr = fmt.Errorf("TLS server name %q on a connection to %s (domain fronting is not allowed)", hi.ServerName, f.name)
				return nil, sniErr
			}
			return nil, nil
		},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return e.opts.CA.Leaf(f.name)
		},
	}
	tc := tls.Server(pc, cfg)
	hctx, cancel := context.WithTimeout(ctx, e.opts.HandshakeTimeout)
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		reason := "TLS handshake with the guest failed: " + err.Error()
		if sniErr != nil {
			reason = sniErr.Error()
		}
		e.audit(audit.Entry{Proto: "https", Name: f.name, Port: f.port, Decision: audit.DecisionDeny, Reason: reason})
		return
	}
	_ = guest.SetReadDeadline(time.Time{})
	e.serveHTTP(ctx, f, tc, true)
}

// oneConnListener hands out one connection, then blocks until closed.
type oneConnListener struct {
	conn   chan net.Conn
	closed chan struct{}
	once   sync.Once
	addr   net.Addr
	// hijacked is set when the connection leaves the server (a WebSocket).
	hijacked atomic.Bool
}

func newOneConnListener(c net.Conn) *oneConnListener {
	l := &oneConnListener{conn: make(chan net.Conn, 1), closed: make(chan struct{}), addr: c.LocalAddr()}
	l.conn <- c
	return l
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conn:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.addr }

// serveHTTP serves the guest's HTTP on conn with net/http (HTTP/1.1, and
// HTTP/2 when conn is TLS that negotiated h2), every request going
// through handle.
func (e *Engine) serveHTTP(ctx context.Context, f *flow, conn net.Conn, isTLS bool) {
	ln := newOneConnListener(conn)
	var handlers sync.WaitGroup
	var mu sync.Mutex
	serving := true
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			if !serving {
				mu.Unlock()
				return
			}
			handlers.Add(1)
			mu.Unlock()
			defer handlers.Done()
			e.handle(w, r, f, isTLS)
			if ln.hijacked.Load() {
				ln.Close()
			}
		}),
		ReadHeaderTimeout: e.opts.ReadHeaderTimeout,
		IdleTimeout:       e.opts.IdleTimeout,
		MaxHeaderBytes:    e.opts.MaxHeaderBytes,
		ConnState: func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateClosed:
				ln.Close()
			case http.StateHijacked:
				ln.hijacked.Store(true)
			}
		},
		BaseContext: func(net.Listener) context.Context { return ctx },
		ErrorLog:    slog.NewLogLogger(e.opts.Logger.Handler(), slog.LevelDebug),
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:      128,
			MaxDecoderHeaderTableSize: 64 << 10,
			MaxEncoderHeaderTableSize: 64 << 10,
			MaxReadFrameSize:          1 << 20,
		},
	}
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		srv.Close()
	})
	defer stop()
	_ = srv.Serve(ln)
	conn.Close()
	mu.Lock()
	serving = false
	mu.Unlock()
	handlers.Wait()
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (e *Engine) roundTrip(r *http.Request) (*http.Response, error) {
	rs := requestStateOf(r)
	if rs == nil {
		return nil, errors.New("request without egress state")
	}
	return rs.st.transport.RoundTrip(r)
}
