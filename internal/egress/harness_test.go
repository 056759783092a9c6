package egress

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/policy"
)

// upstreamPKI is a CA made by the test for the upstream servers, which
// the policy adds as a spec CA.
type upstreamPKI struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newUpstreamPKI(t testing.TB) *upstreamPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "upstream test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &upstreamPKI{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (p *upstreamPKI) leaf(t testing.TB, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// upstreamTLS starts an HTTPS server (h2 and http/1.1 by ALPN) with a
// certificate for names from pki.
func upstreamTLS(t testing.TB, pki *upstreamPKI, h http.Handler, names ...string) *httptest.Server {
	t.Helper()
	return startUpstreamTLS(t, pki, h, true, names...)
}

func startUpstreamTLS(t testing.TB, pki *upstreamPKI, h http.Handler, h2 bool, names ...string) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.EnableHTTP2 = h2
	s.TLS = &tls.Config{Certificates: []tls.Certificate{pki.leaf(t, names...)}}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func serverAddr(s *httptest.Server) string {
	return s.Listener.Addr().String()
}

// harness serves an Engine on loopback listeners, one per name and port,
// each handing its connections to ServeFlow as that name and port: what
// the network stack does with the synthetic address a guest dialled.
type harness struct {
	t        testing.TB
	eng      *Engine
	guestCA  *ca.Authority
	auditDir string
	aw       *audit.Writer
	ctx      context.Context

	mu        sync.Mutex
	listeners map[string]net.Listener
	flows     sync.WaitGroup
}

func newHarness(t testing.TB, p policy.Sandbox, secrets map[string][]byte, placeholders map[string]string, tune ...func(*Options)) *harness {
	t.Helper()
	pol, err := Compile(p, secrets, placeholders)
	if err != nil {
		t.Fatal(err)
	}
	gca, err := ca.New()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, guestCA: gca, auditDir: t.TempDir(), listeners: make(map[string]net.Listener)}
	h.aw, err = audit.Open(h.auditDir, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{CA: gca, Audit: h.aw}
	for _, f := range tune {
		f(&opts)
	}
	h.eng, err = NewEngine(pol, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.ctx = ctx
	t.Cleanup(func() {
		cancel()
		h.mu.Lock()
		for _, l := range h.listeners {
			l.Close()
		}
		h.mu.Unlock()
		h.eng.Close()
		done := make(chan struct{})
		go func() { h.flows.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("flows still running 10s after the test")
		}
		h.aw.Close()
	})
	return h
}

// addr returns the loopback address whose connections are flows to
// name:port.
func (h *harness) addr(name string, port uint16) string {
	key := name + ":" + strconv.Itoa(int(port))
	h.mu.Lock()
	defer h.mu.Unlock()
	if l, ok := h.listeners[key]; ok {
		return l.Addr().String()
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.t.Fatal(err)
	}
	h.listeners[key] = l
	h.flows.Add(1)
	go func() {
		defer h.flows.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h.flows.Add(1)
			go func() {
				defer h.flows.Done()
				h.eng.ServeFlow(h.ctx, name, port, c)
			}()
		}
	}()
	return l.Addr().String()
}

// dial connects to the engine as the guest would connect to addr
// ("name:port").
func (h *harness) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", h.addr(host, uint16(n)))
}

// client is the guest's HTTP client: it trusts the guest CA only and
// offers h2 and http/1.1 when h2, http/1.1 only otherwise.
func (h *harness) client(h2 bool) *http.Client {
	tr := &http.Transport{
		DialContext:        h.dial,
		TLSClientConfig:    &tls.Config{RootCAs: h.guestCA.Pool()},
		ForceAttemptHTTP2:  h2,
		DisableCompression: true,
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	h.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// guestTLS opens a TLS connection as the guest to name:port with sni.
func (h *harness) guestTLS(name string, port uint16, sni string, protos ...string) (*tls.Conn, error) {
	c, err := net.DialTimeout("tcp", h.addr(name, port), 5*time.Second)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: h.guestCA.Pool(), NextProtos: protos})
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

// entriesAfter waits, for at most five seconds, until the audit log
// holds n entries that match, then closes it and returns what it holds.
// The engine logs a request once its handler has returned, which can be
// just after the client has read the whole response.
func (h *harness) entriesAfter(n int, match func(audit.Entry) bool) []audit.Entry {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		es, err := audit.Tail(h.auditDir, 10000)
		if err != nil {
			h.t.Fatal(err)
		}
		var got int
		for _, e := range es {
			if match(e) {
				got++
			}
		}
		if got >= n {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return h.entries()
}

// entries closes the audit log and returns what it holds.
func (h *harness) entries() []audit.Entry {
	h.t.Helper()
	h.aw.Close()
	es, err := audit.Tail(h.auditDir, 10000)
	if err != nil {
		h.t.Fatal(err)
	}
	return es
}

func origin(block string, line int) policy.Origin {
	return policy.Origin{Block: block, File: "main.hcl", Line: line}
}

func allow(pattern string, line int) policy.AllowRule {
	return policy.AllowRule{Pattern: policy.MustHostPattern(pattern), Origin: origin("egress.test", line)}
}

func mapping(name, addr string) policy.HostMapping {
	return policy.HostMapping{Name: name, Addr: netip.MustParseAddrPort(addr).String(), Origin: origin("egress.test", 9)}
}

func spec(pki *upstreamPKI, rules []policy.AllowRule, hosts ...policy.HostMapping) policy.Sandbox {
	return policy.Sandbox{
		Allow: rules,
		Hosts: hosts,
		CAs:   []policy.CA{{Path: "upstream-ca.pem", PEM: string(pki.pem), Origin: origin("egress.test", 3)}},
	}
}

// newPlainUpstream starts a plain HTTP server and returns its address.
func newPlainUpstream(t testing.TB, h http.Handler) string {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return serverAddr(s)
}

// waitIdle waits (up to 5 s) until the engine serves no connection.
func (h *harness) waitIdle() {
	h.t.Helper()
	for i := 0; i < 250; i++ {
		h.eng.mu.Lock()
		n := len(h.eng.flows)
		h.eng.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatal("connections still served after 5s")
}
