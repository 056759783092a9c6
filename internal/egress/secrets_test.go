package egress

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/policy"
)

const (
	tokenValue = "real-token-0123456789abcdef"
	tokenPH    = "sbx_ph_token_5f2c9a0d4e6b8a1c3e5f7a9b0c2d4e6f"
)

func secretSpec(pki *upstreamPKI, bound string, rules []policy.AllowRule, hosts ...policy.HostMapping) policy.Sandbox {
	s := spec(pki, rules, hosts...)
	s.Secrets = []policy.SecretBinding{{
		Name: "token", Env: "API_TOKEN", Source: "env:API_TOKEN",
		Hosts:  []policy.HostPattern{policy.MustHostPattern(bound)},
		Origin: origin("secret.token", 20),
	}}
	return s
}

// secretHarness has api.test (the secret's host) and other.test (allowed,
// not bound), both served by handler.
func secretHarness(t *testing.T, handler http.Handler) (*harness, chan string) {
	t.Helper()
	pki := newUpstreamPKI(t)
	hits := make(chan string, 100)
	up := upstreamTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- r.Host
		handler.ServeHTTP(w, r)
	}), "api.test", "other.test")
	p := secretSpec(pki, "api.test", []policy.AllowRule{allow("api.test", 4), allow("other.test", 5)},
		mapping("api.test", serverAddr(up)), mapping("other.test", serverAddr(up)))
	h := newHarness(t, p, map[string][]byte{"token": []byte(tokenValue)}, map[string]string{"token": tokenPH})
	return h, hits
}

// checkAuth answers 200 when the request carries the real value as a
// Bearer token or Basic password, 401 otherwise.
func checkAuth(w http.ResponseWriter, r *http.Request) {
	if _, pass, ok := r.BasicAuth(); ok && pass == tokenValue {
		w.Write([]byte("basic ok"))
		return
	}
	if r.Header.Get("Authorization") == "Bearer "+tokenValue {
		w.Write([]byte("bearer ok"))
		return
	}
	http.Error(w, "bad credentials", http.StatusUnauthorized)
}

func TestSecretSubstitutedOnlyForItsHost(t *testing.T) {
	h, hits := secretHarness(t, http.HandlerFunc(checkAuth))
	for _, h2 := range []bool{false, true} {
		c := h.client(h2)

		req := mustRequest(t, "GET", "https://api.test/v1", "")
		req.Header.Set("Authorization", "Bearer "+tokenPH)
		if res, body := do(t, c, req); res.StatusCode != 200 || body != "bearer ok" {
			t.Errorf("h2=%v bearer: %d %q", h2, res.StatusCode, body)
		}

		req = mustRequest(t, "GET", "https://api.test/repo.git/info/refs", "")
		req.SetBasicAuth("x-access-token", tokenPH)
		if res, body := do(t, c, req); res.StatusCode != 200 || body != "basic ok" {
			t.Errorf("h2=%v basic: %d %q", h2, res.StatusCode, body)
		}

		// The placeholder to another allowed host: refused, naming the
		// secret and where to change it.
		for _, tc := range []struct {
			what string
			set  func(*http.Request)
		}{
			{"bearer placeholder", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tokenPH) }},
			{"basic placeholder", func(r *http.Request) { r.SetBasicAuth("u", tokenPH) }},
			{"placeholder in another header", func(r *http.Request) { r.Header.Set("X-Api-Key", tokenPH) }},
			{"real value typed by the guest", func(r *http.Request) { r.Header.Set("X-Leak", "v="+tokenValue) }},
			{"real value in Basic", func(r *http.Request) { r.SetBasicAuth("u", tokenValue) }},
			{"placeholder in the query", func(r *http.Request) { r.URL.RawQuery = "key=" + tokenPH }},
			{"real value in the path", func(r *http.Request) { r.URL.Path = "/" + tokenValue }},
		} {
			req := mustRequest(t, "GET", "https://other.test/", "")
			tc.set(req)
			res, body := do(t, c, req)
			if res.StatusCode != 403 || !strings.Contains(body, `secret "token"`) || !strings.Contains(body, "main.hcl:20") {
				t.Errorf("h2=%v %s to other.test: %d %q", h2, tc.what, res.StatusCode, body)
			}
			if strings.Contains(body, tokenValue) {
				t.Errorf("h2=%v %s: the refusal carries the value", h2, tc.what)
			}
		}
	}
	close(hits)
	for host := range hits {
		if host != "api.test" {
			t.Errorf("upstream got a request for %s", host)
		}
	}

	h.entries()
	raw, err := os.ReadFile(filepath.Join(h.auditDir, audit.File))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(tokenValue)) {
		t.Errorf("the audit log holds the value: %s", raw)
	}
	var withSecret int
	for _, e := range h.entries() {
		if len(e.Secrets) == 1 && e.Secrets[0] == "token" && e.Decision == audit.DecisionAllow {
			withSecret++
		}
	}
	if withSecret != 4 {
		t.Errorf("%d allowed entries name the secret, want 4", withSecret)
	}
}

// TestEchoedValueMasked plays an upstream that echoes the credential back
// in headers, a redirect, the body (split across writes, gzip-compressed
// or not) and trailers.
func TestEchoedValueMasked(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		w.Header().Set("X-Echo", auth)
		w.Header().Set("X-Accept-Encoding", r.Header.Get("Accept-Encoding"))
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "https://api.test/next?t="+strings.TrimPrefix(auth, "Bearer "), http.StatusFound)
		case "/split":
			w.Header().Set("Trailer", "X-Trail")
			fl := w.(http.Flusher)
			half := len(auth) / 2
			w.Write([]byte("start " + auth[:half]))
			fl.Flush()
			w.Write([]byte(auth[half:] + " end"))
			w.Header().Set("X-Trail", auth)
		case "/gzip":
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			zw.Write([]byte("compressed " + auth))
			zw.Close()
		case "/brotli":
			w.Header().Set("Content-Encoding", "br")
			w.Write([]byte("opaque"))
		case "/early":
			w.Header().Set("Link", "</x>; rel=preload; t="+auth)
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Del("Link")
			w.Write([]byte("after hints"))
		case "/basic":
			w.Write([]byte(auth))
		default:
			w.Write([]byte("body " + auth))
		}
	})
	h, _ := secretHarness(t, echo)
	for _, h2 := range []bool{false, true} {
		c := h.client(h2)
		call := func(path string) (*http.Response, string) {
			req := mustRequest(t, "GET", "https://api.test"+path, "")
			req.Header.Set("Authorization", "Bearer "+tokenPH)
			req.Header.Set("Accept-Encoding", "gzip, br")
			return do(t, c, req)
		}
		res, body := call("/")
		if body != "body Bearer "+tokenPH || res.Header.Get("X-Echo") != "Bearer "+tokenPH {
			t.Errorf("h2=%v echo: header %q body %q", h2, res.Header.Get("X-Echo"), body)
		}
		if got := res.Header.Get("X-Accept-Encoding"); got != "identity" {
			t.Errorf("h2=%v upstream was asked for %q, want identity", h2, got)
		}
		res, _ = call("/redirect")
		if loc := res.Header.Get("Location"); loc != "https://api.test/next?t="+tokenPH {
			t.Errorf("h2=%v Location %q", h2, loc)
		}
		res, body = call("/split")
		if body != "start Bearer "+tokenPH+" end" {
			t.Errorf("h2=%v split body %q", h2, body)
		}
		if tr := res.Trailer.Get("X-Trail"); tr != "Bearer "+tokenPH {
			t.Errorf("h2=%v trailer %q", h2, tr)
		}
		res, body = call("/gzip")
		if body != "compressed Bearer "+tokenPH || res.Header.Get("Content-Encoding") != "" {
			t.Errorf("h2=%v gzip: encoding %q body %q", h2, res.Header.Get("Content-Encoding"), body)
		}
		res, body = call("/brotli")
		if res.StatusCode != http.StatusBadGateway || !strings.Contains(body, "br-encoded") {
			t.Errorf("h2=%v brotli: %d %q", h2, res.StatusCode, body)
		}
		var hints []string
		req := mustRequest(t, "GET", "https://api.test/early", "")
		req.Header.Set("Authorization", "Bearer "+tokenPH)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				hints = append(hints, h.Get("Link"))
				return nil
			},
		}))
		if _, body := do(t, c, req); body != "after hints" || len(hints) != 1 || hints[0] != "</x>; rel=preload; t=Bearer "+tokenPH {
			t.Errorf("h2=%v early hints %q, body %q", h2, hints, body)
		}
		req = mustRequest(t, "GET", "https://api.test/basic", "")
		req.SetBasicAuth("user", tokenPH)
		res, body = do(t, c, req)
		want := "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+tokenPH))
		if body != want || res.Header.Get("X-Echo") != want {
			t.Errorf("h2=%v basic echo: header %q body %q, want %q", h2, res.Header.Get("X-Echo"), body, want)
		}
	}
}

func TestCompileRejects(t *testing.T) {
	b := policy.SecretBinding{Name: "s", Env: "S", Hosts: []policy.HostPattern{policy.MustHostPattern("a.test")}}
	for _, tc := range []struct {
		name   string
		p      policy.Sandbox
		values map[string][]byte
		ph     map[string]string
		want   string
	}{
		{"missing value", policy.Sandbox{Secrets: []policy.SecretBinding{b}}, nil, map[string]string{"s": tokenPH}, "no value"},
		{"short value", policy.Sandbox{Secrets: []policy.SecretBinding{b}}, map[string][]byte{"s": []byte("abc")}, map[string]string{"s": tokenPH}, "shorter"},
		{"newline", policy.Sandbox{Secrets: []policy.SecretBinding{b}}, map[string][]byte{"s": []byte("abcdefgh\nij")}, map[string]string{"s": tokenPH}, "line break"},
		{"no placeholder", policy.Sandbox{Secrets: []policy.SecretBinding{b}}, map[string][]byte{"s": []byte(tokenValue)}, nil, "placeholder"},
		{"bad CA", policy.Sandbox{CAs: []policy.CA{{Path: "x.pem", PEM: "junk"}}}, nil, nil, "no PEM certificate"},
		{"bad path pattern", policy.Sandbox{Allow: []policy.AllowRule{{Pattern: policy.MustHostPattern("a.test"), Paths: []string{"v1/**"}}}}, nil, nil, `must start with "/"`},
	} {
		_, err := Compile(tc.p, tc.values, tc.ph)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), tokenValue) {
			t.Errorf("%s: error carries the value", tc.name)
		}
	}
}

// TestRequestTrailersDropped plays a guest that hides a placeholder in a
// chunked request's trailer, where header checks would not see it.
func TestRequestTrailersDropped(t *testing.T) {
	got := make(chan string, 1)
	h, _ := secretHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		got <- r.Trailer.Get("X-T")
	}))
	c, err := h.guestTLS("other.test", 443, "other.test", "http/1.1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: other.test\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n3\r\nabc\r\n0\r\nX-T: %s\r\n\r\n", tokenValue)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	if tr := <-got; tr != "" {
		t.Errorf("upstream got trailer %q", tr)
	}
}

// TestValueInBodyToOtherHostRefused plays a guest that learnt a value and
// posts it to another allowed host, whole or split across writes: the
// upstream never receives it. A part of a value, or the value to its own
// host, passes.
func TestValueInBodyToOtherHostRefused(t *testing.T) {
	got := make(chan string, 10)
	h, _ := secretHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r.Host + " " + string(b)
	}))
	post := func(host string, parts ...string) (*http.Response, string) {
		pr, pw := io.Pipe()
		go func() {
			for _, p := range parts {
				pw.Write([]byte(p))
				time.Sleep(20 * time.Millisecond)
			}
			pw.Close()
		}()
		req := mustRequest(t, "POST", "https://"+host+"/upload", "")
		req.Body = pr
		return do(t, h.client(true), req)
	}
	half := len(tokenValue) / 2
	for _, parts := range [][]string{
		{"token=" + tokenValue},
		{"token=" + tokenValue[:half], tokenValue[half:] + "&x=1"},
		{"a", tokenValue[:3], tokenValue[3:]},
	} {
		res, body := post("other.test", parts...)
		if res.StatusCode != 403 || !strings.Contains(body, `secret "token"`) || !strings.Contains(body, "request body") {
			t.Errorf("%q: %d %q", parts, res.StatusCode, body)
		}
	}
	if res, _ := post("other.test", "token="+tokenValue[:10]); res.StatusCode != 200 {
		t.Errorf("part of a value: %d", res.StatusCode)
	}
	if res, _ := post("api.test", "token="+tokenValue); res.StatusCode != 200 {
		t.Errorf("the value to its own host: %d", res.StatusCode)
	}
	close(got)
	for s := range got {
		if strings.HasPrefix(s, "other.test") && strings.Contains(s, tokenValue) {
			t.Errorf("upstream got %q", s)
		}
	}
}
