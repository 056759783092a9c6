package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/audit"
)

// newTransport makes the upstream transport for p: HTTP/1.1 and HTTP/2
// by ALPN, TLS verified for the request's name against the system roots
// plus p's CAs, every wait bounded, no proxy from the environment, and
// no transparent compression (the engine decides Accept-Encoding).
func (e *Engine) newTransport(p *Policy) *http.Transport {
	u := e.opts.Upstream
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return e.dialUpstream(ctx, p, addr)
		},
		TLSClientConfig:        &tls.Config{RootCAs: p.roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    u.TLSHandshakeTimeout,
		ResponseHeaderTimeout:  u.ResponseHeaderTimeout,
		IdleConnTimeout:        u.IdleConnTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxIdleConnsPerHost:    16,
		MaxResponseHeaderBytes: 1 << 20,
		DisableCompression:     true,
	}
}

// dialUpstream dials name:port for the guest. A hosts mapping's address
// is dialled as is (the spec named it); any other name is resolved on the
// host and only public unicast addresses are dialled, so that a name
// cannot lead to the host's loopback, a private network or a metadata
// service.
func (e *Engine) dialUpstream(ctx context.Context, p *Policy, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	name := canonicalName(host)
	ctx, cancel := context.WithTimeout(ctx, e.opts.Upstream.DialTimeout)
	defer cancel()
	if ap, ok := p.dialTarget(name); ok {
		return e.opts.Upstream.DialContext(ctx, "tcp", ap.String())
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return nil, fmt.Errorf("%s is an IP address; only names are dialled", name)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("bad port in %q", addr)
	}
	addrs, err := e.opts.Upstream.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return nil, fmt.Errorf("resolving %s on the host: %w", name, err)
	}
	var errs []error
	for _, a := range addrs {
		if !publicAddr(a) {
			errs = append(errs, fmt.Errorf("%s resolves to %s, which is not a public address (pin it with a hosts mapping if it is meant)", name, a))
			continue
		}
		c, err := e.opts.Upstream.DialContext(ctx, "tcp", netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%s has no address", name)
	}
	return nil, errors.Join(errs...)
}

var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking; the sandboxes' synthetic addresses
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"), // NAT64 can reach any IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"), // 6to4 embeds IPv4 addresses
}

// publicAddr reports whether a is a global unicast address outside every
// private, loopback, link-local, shared and reserved range.
func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// serveTCP splices a raw TCP flow to its upstream.
func (e *Engine) serveTCP(ctx context.Context, f *flow, p *Policy, guest net.Conn) {
	start := time.Now()
	en := withOrigin(audit.Entry{Proto: "tcp", Name: f.name, Port: f.port}, p.ruleFor(f.name, f.port))
	up, err := e.dialUpstream(ctx, p, net.JoinHostPort(f.name, strconv.Itoa(int(f.port))))
	if err != nil {
		en.Decision, en.Reason = audit.DecisionDeny, "upstream: "+err.Error()
		e.audit(en)
		reset(guest)
		return
	}
	stop := context.AfterFunc(ctx, func() { up.Close() })
	defer stop()
	en.BytesUp, en.BytesDown = splice(guest, up)
	en.Decision, en.Duration = audit.DecisionAllow, time.Since(start)
	e.audit(en)
}

// maxClientHello bounds what is read to find a passthrough connection's
// SNI; a ClientHello with post-quantum key shares is under 2 KiB.
const maxClientHello = 64 << 10

// servePassthrough checks a TLS connection's SNI against the flow's name
// and splices it, ClientHello included, to the upstream unmodified.
func (e *Engine) servePassthrough(ctx context.Context, f *flow, pc *peekConn) {
	start := time.Now()
	p := e.cur.Load().pol
	en := withOrigin(audit.Entry{Proto: "tls-passthrough", Name: f.name, Port: f.port}, p.ruleFor(f.name, f.port))
	hello, sni, err := readClientHello(pc, e.opts.HandshakeTimeout)
	if err == nil && sni == "" {
		err = errors.New("the ClientHello names no server (SNI); a passthrough connection must name its host")
	}
	if err == nil && canonicalName(sni) != f.name {
		err = fmt.Errorf("TLS server name %q on a connection to %s (domain fronting is not allowed)", sni, f.name)
	}
	if err != nil {
		en.Decision, en.Reason = audit.DecisionDeny, err.Error()
		e.audit(en)
		reset(pc.Conn)
		return
	}
	_ = pc.Conn.SetReadDeadline(time.Time{})
	up, err := e.dialUpstream(ctx, p, net.JoinHostPort(f.name, strconv.Itoa(int(f.port))))
	if err != nil {
		en.Decision, en.Reason = audit.DecisionDeny, "upstream: "+err.Error()
		e.audit(en)
		reset(pc.Conn)
		return
	}
	stop := context.AfterFunc(ctx, func() { up.Close() })
	defer stop()
	if _, err := up.Write(hello); err != nil {
		up.Close()
		en.Decision, en.Reason = audit.DecisionDeny, "upstream: "+err.Error()
		e.audit(en)
		return
	}
	en.BytesUp, en.BytesDown = splice(pc, up)
	en.BytesUp += int64(len(hello))
	en.Decision, en.Duration = audit.DecisionAllow, time.Since(start)
	e.audit(en)
}

// helloRecorder feeds crypto/tls the guest's bytes, keeping a copy, and
// swallows what the TLS server would answer.
type helloRecorder struct {
	net.Conn
	r   io.Reader
	buf bytes.Buffer
}

func (h *helloRecorder) Read(p []byte) (int, error) {
	if h.buf.Len() >= maxClientHello {
		return 0, errors.New("ClientHello too large")
	}
	if len(p) > maxClientHello-h.buf.Len() {
		p = p[:maxClientHello-h.buf.Len()]
	}
	n, err := h.r.Read(p)
	h.buf.Write(p[:n])
	return n, err
}

func (h *helloRecorder) Write(p []byte) (int, error) { return len(p), nil }

var errGotHello = errors.New("got ClientHello")

// readClientHello reads the guest's ClientHello with crypto/tls's own
// parser, stopping the handshake as soon as it is parsed, and returns
// every byte read (to be replayed upstream) and the server name.
func readClientHello(pc *peekConn, timeout time.Duration) ([]byte, string, error) {
	rec := &helloRecorder{Conn: pc.Conn, r: pc.r}
	var sni string
	srv := tls.Server(rec, &tls.Config{
		GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			sni = hi.ServerName
			return nil, errGotHello
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = pc.Conn.SetReadDeadline(time.Now().Add(timeout))
	err := srv.HandshakeContext(ctx)
	if !errors.Is(err, errGotHello) {
		return nil, "", fmt.Errorf("reading the TLS ClientHello: %v", err)
	}
	return rec.buf.Bytes(), sni, nil
}

// splice copies both ways until both directions end, passing on each
// side's end of stream as a half-close, and returns the bytes copied
// from a to b and from b to a. When either copy fails both are closed.
func splice(a, b net.Conn) (ab, ba int64) {
	var wg sync.WaitGroup
	var once sync.Once
	closeBoth := func() { once.Do(func() { a.Close(); b.Close() }) }
	wg.Add(2)
	go func() {
		defer wg.Done()
		n, err := io.Copy(b, a)
		ab = n
		if err != nil || closeWrite(b) != nil {
			closeBoth()
		}
	}()
	go func() {
		defer wg.Done()
		n, err := io.Copy(a, b)
		ba = n
		if err != nil || closeWrite(a) != nil {
			closeBoth()
		}
	}()
	wg.Wait()
	closeBoth()
	return ab, ba
}
