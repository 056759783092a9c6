package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/policy"
)

// echoServer is a TCP server that echoes each connection until EOF, then
// closes its side.
func echoServer(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

func TestTCPRuleSpliced(t *testing.T) {
	addr := echoServer(t)
	h := newHarness(t, policy.Sandbox{
		TCP:   []policy.TCPRule{{Dest: policy.HostPort{Host: "ssh.test", Port: 22}, Origin: origin("egress.ssh", 30)}},
		Hosts: []policy.HostMapping{mapping("ssh.test", addr)},
	}, nil, nil)
	c, err := net.Dial("tcp", h.addr("ssh.test", 22))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "SSH-2.0-test\r\n")
	c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "SSH-2.0-test\r\n" {
		t.Fatalf("echo %q %v", b, err)
	}
	c.Close()
	h.waitIdle()
	for _, e := range h.entries() {
		if e.Proto == "tcp" && e.Decision == audit.DecisionAllow {
			if e.BytesUp != 14 || e.BytesDown != 14 || e.RuleLine != 30 {
				t.Errorf("entry %+v", e)
			}
			return
		}
	}
	t.Error("no audit entry for the spliced flow")
}

// TestPassthrough checks that a passthrough rule splices TLS end to end
// (the guest sees the upstream's own certificate) and still checks SNI.
func TestPassthrough(t *testing.T) {
	pki := newUpstreamPKI(t)
	up := upstreamTLS(t, pki, echoHandler(), "pin.test")
	rule := policy.AllowRule{Pattern: policy.MustHostPattern("pin.test"), Passthrough: true, Origin: origin("egress.pin", 40)}
	h := newHarness(t, spec(pki, []policy.AllowRule{rule, allow("other.test", 41)}, mapping("pin.test", serverAddr(up))), nil, nil)

	dial := func(sni string) (*tls.Conn, error) {
		c, err := net.Dial("tcp", h.addr("pin.test", 443))
		if err != nil {
			return nil, err
		}
		pool := pki.pool()
		tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: pool, NextProtos: []string{"http/1.1"}, InsecureSkipVerify: sni == ""})
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			c.Close()
			return nil, err
		}
		return tc, nil
	}
	tc, err := dial("pin.test")
	if err != nil {
		t.Fatal(err)
	}
	if got := tc.ConnectionState().PeerCertificates[0].Issuer.CommonName; got != "upstream test CA" {
		t.Errorf("guest saw a certificate from %q, want the upstream's own", got)
	}
	io.WriteString(tc, "GET /p HTTP/1.1\r\nHost: pin.test\r\nConnection: close\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	tc.Close()
	if string(b) != "HTTP/1.1 pin.test GET /p body=" {
		t.Errorf("body %q", b)
	}
	if _, err := dial("other.test"); err == nil {
		t.Error("passthrough with SNI other.test on a flow to pin.test completed")
	}
	if _, err := dial(""); err == nil {
		t.Error("passthrough without SNI completed")
	}
	h.waitIdle()
	var allowed, denied int
	var noSNI bool
	for _, e := range h.entries() {
		if e.Proto == "tls-passthrough" {
			switch e.Decision {
			case audit.DecisionAllow:
				allowed++
			case audit.DecisionDeny:
				denied++
				noSNI = noSNI || strings.Contains(e.Reason, "names no server")
			}
		}
	}
	if !noSNI {
		t.Error("no audit entry says the ClientHello named no server")
	}
	if allowed != 1 || denied != 2 {
		t.Errorf("passthrough entries: %d allowed, %d denied; want 1, 2", allowed, denied)
	}
}

func (p *upstreamPKI) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.cert)
	return pool
}

func TestPublicAddr(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"93.184.215.14", true},
		{"2606:4700::1111", true},
		{"127.0.0.1", false},
		{"10.1.2.3", false},
		{"172.16.0.1", false},
		{"192.168.1.1", false},
		{"169.254.169.254", false},
		{"100.64.0.1", false},
		{"198.18.0.5", false},
		{"0.0.0.0", false},
		{"255.255.255.255", false},
		{"224.0.0.1", false},
		{"::1", false},
		{"fe80::1", false},
		{"fd00::1", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"64:ff9b::a00:1", false},
		{"2002:7f00:1::", false},
	} {
		if got := publicAddr(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("publicAddr(%s) = %v", tc.addr, got)
		}
	}
}

// TestNameResolvingToPrivateAddressRefused plays a name whose DNS answer
// points at the host's loopback, a private network or the metadata
// service: nothing is dialled.
func TestNameResolvingToPrivateAddressRefused(t *testing.T) {
	var dials atomic.Int32
	h := newHarness(t, policy.Sandbox{Allow: []policy.AllowRule{allow("evil.test", 4)}}, nil, nil, func(o *Options) {
		o.Upstream.LookupNetIP = func(ctx context.Context, network, host string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("::ffff:192.168.0.1")}, nil
		}
		o.Upstream.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return nil, errors.New("dial attempted")
		}
	})
	res, body := get(t, h.client(false), "https://evil.test/")
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(body, "not a public address") {
		t.Errorf("%d %q", res.StatusCode, body)
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("%d dials", n)
	}
}

// TestUpstreamTimeouts plays upstreams that never answer: one that never
// completes the TLS handshake, one that never sends response headers.
func TestUpstreamTimeouts(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	pki := newUpstreamPKI(t)
	stall := make(chan struct{})
	defer close(stall)
	slow := upstreamTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}), "slow.test")
	h := newHarness(t, spec(pki, []policy.AllowRule{allow("silent.test", 4), allow("slow.test", 5)},
		mapping("silent.test", silent.Addr().String()), mapping("slow.test", serverAddr(slow))), nil, nil,
		func(o *Options) {
			o.Upstream.TLSHandshakeTimeout = 300 * time.Millisecond
			o.Upstream.ResponseHeaderTimeout = 300 * time.Millisecond
		})
	for _, u := range []string{"https://silent.test/", "https://slow.test/"} {
		start := time.Now()
		res, body := get(t, h.client(false), u)
		if res.StatusCode != http.StatusGatewayTimeout && res.StatusCode != http.StatusBadGateway {
			t.Errorf("%s: %d %q", u, res.StatusCode, body)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: answered after %v", u, d)
		}
	}
}

// TestGuestBounds plays a guest that holds connections open, sends
// nothing, trickles a header or sends a huge one.
func TestGuestBounds(t *testing.T) {
	pki := newUpstreamPKI(t)
	up := upstreamTLS(t, pki, echoHandler(), "api.test")
	h := newHarness(t, spec(pki, []policy.AllowRule{allow("api.test", 4)}, mapping("api.test", serverAddr(up))), nil, nil,
		func(o *Options) {
			o.MaxConns = 2
			o.HandshakeTimeout = 300 * time.Millisecond
			o.ReadHeaderTimeout = 300 * time.Millisecond
			o.MaxHeaderBytes = 4 << 10
		})
	closedWithin := func(c net.Conn, d time.Duration) bool {
		_ = c.SetReadDeadline(time.Now().Add(d))
		_, err := io.ReadAll(c)
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
	t.Run("silent guest", func(t *testing.T) {
		c, err := net.Dial("tcp", h.addr("api.test", 443))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if !closedWithin(c, 3*time.Second) {
			t.Error("a connection that sent nothing is still open after 3s")
		}
	})
	t.Run("trickled header", func(t *testing.T) {
		c, err := h.guestTLS("api.test", 443, "api.test", "http/1.1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: api.test\r\n")
		if !closedWithin(c, 3*time.Second) {
			t.Error("a connection with an unfinished header is still open after 3s")
		}
	})
	t.Run("huge header", func(t *testing.T) {
		req := mustRequest(t, "GET", "https://api.test/", "")
		req.Header.Set("X-Big", strings.Repeat("a", 64<<10))
		res, err := h.client(false).Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("status %d", res.StatusCode)
			}
		}
	})
	t.Run("garbage TLS", func(t *testing.T) {
		c, err := net.Dial("tcp", h.addr("api.test", 443))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte{0x16, 0x03, 0x01, 0xff, 0xff, 1, 2, 3, 4, 5, 6, 7})
		if !closedWithin(c, 3*time.Second) {
			t.Error("garbage TLS left the connection open")
		}
	})
	t.Run("max conns", func(t *testing.T) {
		h.waitIdle()
		var held []net.Conn
		for i := 0; i < 2; i++ {
			c, err := h.guestTLS("api.test", 443, "api.test", "http/1.1")
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
		}
		start := time.Now()
		if c, err := h.guestTLS("api.test", 443, "api.test", "http/1.1"); err == nil {
			c.Close()
			t.Error("a third connection completed with MaxConns 2")
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("refusing the third connection took %v", d)
		}
		for _, c := range held {
			c.Close()
		}
		var ok bool
		for i := 0; i < 50 && !ok; i++ {
			time.Sleep(20 * time.Millisecond)
			c, err := h.guestTLS("api.test", 443, "api.test", "http/1.1")
			if err == nil {
				c.Close()
				ok = true
			}
		}
		if !ok {
			t.Error("no connection accepted after the held ones closed")
		}
	})
	var limit bool
	for _, e := range h.entries() {
		if strings.Contains(e.Reason, "too many connections") {
			limit = true
		}
	}
	if !limit {
		t.Error("no audit entry for the connection over the limit")
	}
}
