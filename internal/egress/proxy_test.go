package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/policy"
)

// echoHandler answers with what it saw: the protocol, the Host, the
// method and path, and the body.
func echoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Upstream-Proto", r.Proto)
		fmt.Fprintf(w, "%s %s %s %s body=%s", r.Proto, r.Host, r.Method, r.URL.Path, b)
	})
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	return do(t, c, mustRequest(t, "GET", url, ""))
}

func mustRequest(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func do(t *testing.T, c *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", req.Method, req.URL, err)
	}
	return res, string(b)
}

func TestHTTP1AndHTTP2BothSides(t *testing.T) {
	pki := newUpstreamPKI(t)
	up := upstreamTLS(t, pki, echoHandler(), "api.test")
	h := newHarness(t, spec(pki, []policy.AllowRule{allow("api.test", 4)}, mapping("api.test", serverAddr(up))), nil, nil)

	for _, tc := range []struct {
		name      string
		h2        bool
		wantGuest string
	}{
		{"h1", false, "HTTP/1.1"},
		{"h2", true, "HTTP/2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := h.client(tc.h2)
			res, body := get(t, c, "https://api.test/v1/models")
			if res.StatusCode != 200 {
				t.Fatalf("status %d: %s", res.StatusCode, body)
			}
			if res.Proto != tc.wantGuest {
				t.Errorf("guest side spoke %s, want %s", res.Proto, tc.wantGuest)
			}
			// The upstream side negotiates h2 by ALPN whatever the guest spoke.
			if got := res.Header.Get("X-Upstream-Proto"); got != "HTTP/2.0" {
				t.Errorf("upstream side spoke %s, want HTTP/2.0", got)
			}
			if want := "HTTP/2.0 api.test GET /v1/models body="; body != want {
				t.Errorf("body %q, want %q", body, want)
			}
			res, body = do(t, c, mustRequest(t, "POST", "https://api.test/v1/messages", `{"q":1}`))
			if res.StatusCode != 200 || !strings.HasSuffix(body, `POST /v1/messages body={"q":1}`) {
				t.Errorf("POST: %d %q", res.StatusCode, body)
			}
		})
	}

	isAllowed := func(e audit.Entry) bool {
		return e.Decision == audit.DecisionAllow && e.Name == "api.test" && e.Method != ""
	}
	es := h.entriesAfter(4, isAllowed)
	var allowed int
	for _, e := range es {
		if isAllowed(e) {
			allowed++
			if e.RuleLine != 4 || e.RuleFile != "main.hcl" {
				t.Errorf("entry names rule %s:%d, want main.hcl:4", e.RuleFile, e.RuleLine)
			}
		}
	}
	if allowed != 4 {
		t.Errorf("%d allowed request entries, want 4: %+v", allowed, es)
	}
}

// TestUpstreamHTTP1Only checks that an upstream offering only http/1.1
// is reached over HTTP/1.1 by ALPN while the guest speaks h2.
func TestUpstreamHTTP1Only(t *testing.T) {
	pki := newUpstreamPKI(t)
	up := startUpstreamTLS(t, pki, echoHandler(), false, "api.test")
	h := newHarness(t, spec(pki, []policy.AllowRule{allow("api.test", 4)}, mapping("api.test", serverAddr(up))), nil, nil)
	res, body := get(t, h.client(true), "https://api.test/x")
	if res.StatusCode != 200 || res.Proto != "HTTP/2.0" || res.Header.Get("X-Upstream-Proto") != "HTTP/1.1" {
		t.Fatalf("status %d guest %s upstream %s: %s", res.StatusCode, res.Proto, res.Header.Get("X-Upstream-Proto"), body)
	}
}

func TestPlainHTTPOnPort80(t *testing.T) {
	up := newPlainUpstream(t, echoHandler())
	h := newHarness(t, policy.Sandbox{Allow: []policy.AllowRule{allow("plain.test", 4)}, Hosts: []policy.HostMapping{mapping("plain.test", up)}}, nil, nil)
	res, body := get(t, h.client(false), "http://plain.test/hello")
	if res.StatusCode != 200 || body != "HTTP/1.1 plain.test GET /hello body=" {
		t.Fatalf("%d %q", res.StatusCode, body)
	}
}

// TestUpstreamVerified checks that the host verifies the upstream: a
// server whose certificate the spec's CAs do not vouch for, or that is
// for another name, gets a 502 and no request.
func TestUpstreamVerified(t *testing.T) {
	pki := newUpstreamPKI(t)
	other := newUpstreamPKI(t)
	reached := make(chan struct{}, 10)
	hit := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached <- struct{}{} })
	wrongCA := upstreamTLS(t, other, hit, "api.test")
	wrongName := upstreamTLS(t, pki, hit, "else.test")
	h := newHarness(t, spec(pki, []policy.AllowRule{allow("api.test", 4), allow("name.test", 5)},
		mapping("api.test", serverAddr(wrongCA)), mapping("name.test", serverAddr(wrongName))), nil, nil)
	c := h.client(true)
	for _, u := range []string{"https://api.test/", "https://name.test/"} {
		res, body := get(t, c, u)
		if res.StatusCode != http.StatusBadGateway || !strings.Contains(body, "certificate") {
			t.Errorf("%s: %d %q, want 502 naming the certificate", u, res.StatusCode, body)
		}
	}
	select {
	case <-reached:
		t.Error("an unverified upstream got the request")
	default:
	}
}

// TestFrontingRefused plays a guest that connects to one allowed host and
// asks for another, every way HTTP allows.
func TestFrontingRefused(t *testing.T) {
	pki := newUpstreamPKI(t)
	var hits []string
	hitc := make(chan string, 100)
	up := upstreamTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hitc <- r.Host + r.URL.Path
	}), "a.test", "b.test")
	h := newHarness(t, spec(pki, []policy.AllowRule{allow("a.test", 4), allow("b.test", 5)},
		mapping("a.test", serverAddr(up)), mapping("b.test", serverAddr(up))), nil, nil)

	t.Run("SNI b on a connection to a", func(t *testing.T) {
		// A hostile guest does not verify the certificate: the refusal
		// must come from the engine.
		c, err := net.Dial("tcp", h.addr("a.test", 443))
		if err != nil {
			t.Fatal(err)
		}
		tc := tls.Client(c, &tls.Config{ServerName: "b.test", InsecureSkipVerify: true})
		_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err == nil {
			t.Error("handshake with SNI b.test on a flow to a.test succeeded")
		}
		tc.Close()
	})
	t.Run("Host b over TLS to a", func(t *testing.T) {
		c, err := h.guestTLS("a.test", 443, "a.test", "http/1.1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: b.test\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 403 || !strings.Contains(string(b), "domain fronting") {
			t.Errorf("%d %q", res.StatusCode, b)
		}
	})
	t.Run("absolute URI to b", func(t *testing.T) {
		c, err := h.guestTLS("a.test", 443, "a.test", "http/1.1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET https://b.test/x HTTP/1.1\r\nHost: a.test\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 403 {
			t.Errorf("absolute URI to b.test: %d", res.StatusCode)
		}
	})
	t.Run("pipelined second request to b", func(t *testing.T) {
		c, err := h.guestTLS("a.test", 443, "a.test", "http/1.1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /first HTTP/1.1\r\nHost: a.test\r\n\r\nGET /second HTTP/1.1\r\nHost: b.test\r\n\r\n")
		br := bufio.NewReader(c)
		var codes []int
		for i := 0; i < 2; i++ {
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("response %d: %v", i, err)
			}
			io.Copy(io.Discard, res.Body)
			codes = append(codes, res.StatusCode)
		}
		if codes[0] != 200 || codes[1] != 403 {
			t.Errorf("pipelined: %v, want [200 403]", codes)
		}
	})
	t.Run("h2 stream with authority b", func(t *testing.T) {
		// Go's client sends :authority from req.Host over a connection it
		// picked by URL, which is exactly the trick.
		c := h.client(true)
		req := mustRequest(t, "GET", "https://a.test/h2", "")
		req.Host = "b.test"
		res, body := do(t, c, req)
		if res.StatusCode != 403 || res.ProtoMajor != 2 || !strings.Contains(body, "domain fronting") {
			t.Errorf("%s %d %q", res.Proto, res.StatusCode, body)
		}
	})
	t.Run("CONNECT", func(t *testing.T) {
		c, err := h.guestTLS("a.test", 443, "a.test", "http/1.1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT b.test:443 HTTP/1.1\r\nHost: b.test:443\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 403 || !strings.Contains(string(b), "CONNECT") {
			t.Errorf("%d %q", res.StatusCode, b)
		}
	})
	t.Run("CONNECT to own host", func(t *testing.T) {
		c, err := h.guestTLS("a.test", 443, "a.test", "http/1.1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 403 {
			t.Errorf("%d", res.StatusCode)
		}
	})

	close(hitc)
	for hh := range hitc {
		hits = append(hits, hh)
	}
	for _, hh := range hits {
		if strings.HasPrefix(hh, "b.test") {
			t.Errorf("upstream saw a request for b.test: %v", hits)
		}
	}
	if len(hits) != 1 || hits[0] != "a.test/first" {
		t.Errorf("upstream saw %v, want only a.test/first", hits)
	}
	var denied int
	for _, e := range h.entries() {
		if e.Decision == audit.DecisionDeny {
			denied++
			if e.Reason == "" {
				t.Errorf("denial without reason: %+v", e)
			}
		}
	}
	if denied < 7 {
		t.Errorf("%d denial entries, want at least 7", denied)
	}
}

func TestDeniedConnectionIsFast(t *testing.T) {
	h := newHarness(t, policy.Sandbox{Allow: []policy.AllowRule{allow("a.test", 4)}}, nil, nil)
	for _, addr := range []string{"a.test:22", "nope.test:443"} {
		start := time.Now()
		c := h.client(false)
		c.Timeout = 5 * time.Second
		_, err := c.Get("https://" + addr + "/")
		if err == nil {
			t.Errorf("%s: request succeeded", addr)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: refusal took %v", addr, d)
		}
	}
	es := h.entries()
	if len(es) != 2 || es[0].Decision != audit.DecisionDeny || !strings.Contains(es[0].Reason, "a.test:22") {
		t.Errorf("entries %+v", es)
	}
}

// TestPlaintextOn443Refused: port 443 takes TLS only, so a plain request
// there is not re-originated as plain HTTP to the upstream's port 443.
func TestPlaintextOn443Refused(t *testing.T) {
	h := newHarness(t, policy.Sandbox{Allow: []policy.AllowRule{allow("api.test", 4)}, Hosts: []policy.HostMapping{mapping("api.test", "127.0.0.1:1")}}, nil, nil)
	c, err := net.Dial("tcp", h.addr("api.test", 443))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n")
	b, _ := io.ReadAll(c)
	if len(b) != 0 {
		t.Errorf("got %q, want the connection closed without an answer", b)
	}
}

// TestNoSNIGetsTheName: a ClientHello without SNI reached the name
// through its synthetic address, so it gets the name's certificate, and
// its requests are checked against the name as usual.
func TestNoSNIGetsTheName(t *testing.T) {
	pki := newUpstreamPKI(t)
	up := upstreamTLS(t, pki, echoHandler(), "api.test")
	h := newHarness(t, spec(pki, []policy.AllowRule{allow("api.test", 4), allow("b.test", 5)}, mapping("api.test", serverAddr(up))), nil, nil)
	for _, host := range []string{"api.test", "b.test"} {
		c, err := net.Dial("tcp", h.addr("api.test", 443))
		if err != nil {
			t.Fatal(err)
		}
		pool := h.guestCA.Pool()
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"},
			VerifyConnection: func(cs tls.ConnectionState) error {
				_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: "api.test", Roots: pool})
				return err
			}})
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			t.Fatalf("handshake without SNI: %v", err)
		}
		fmt.Fprintf(tc, "GET /x HTTP/1.1\r\nHost: %s\r\n\r\n", host)
		res, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			t.Fatal(err)
		}
		tc.Close()
		want := 200
		if host != "api.test" {
			want = 403
		}
		if res.StatusCode != want {
			t.Errorf("no SNI, Host %s: %d, want %d", host, res.StatusCode, want)
		}
	}
}
