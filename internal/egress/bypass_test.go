package egress

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/policy"
)

// This file plays a guest that tries to get past path and method rules
// by sending requests that the rule reads one way and a lenient server
// another. The upstream is such a server: it records every request as it
// arrived and routes it the way Tomcat, Spring, Rails or IIS might.

// received is one request as the upstream got it.
type received struct {
	method, uri string
	// route is what a lenient server would act on: its method after
	// overrides and its path after normalisation.
	route string
}

func (r received) String() string { return r.method + " " + r.uri + " (routed as " + r.route + ")" }

// lenientUpstream records each request and answers with its route.
func lenientUpstream(seen chan<- received) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return // an incomplete body is not acted on
		}
		rec := received{method: r.Method, uri: r.RequestURI, route: lenientRoute(r, body)}
		select {
		case seen <- rec:
		default:
		}
		io.WriteString(w, rec.route)
	})
}

// lenientRoute is how a forgiving server reads a request: the method
// upper-cased and overridden by a header or a _method parameter; the
// path with ";" parameters stripped from each segment, "\" read as "/",
// decoded twice, overlong and fullwidth dots read as dots, and dot
// segments resolved. A POST's form body may override the method too.
func lenientRoute(r *http.Request, body []byte) string {
	method := strings.ToUpper(r.Method)
	for k, v := range r.Header {
		switch strings.ReplaceAll(strings.ToLower(k), "_", "-") {
		case "x-http-method-override", "x-http-method", "x-method-override":
			method = strings.ToUpper(v[0])
		}
	}
	target, rawQuery, _ := strings.Cut(r.RequestURI, "?")
	for _, kv := range strings.FieldsFunc(rawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, _ := strings.Cut(kv, "=")
		if k, _ = url.QueryUnescape(k); strings.EqualFold(k, "_method") {
			method = strings.ToUpper(v)
		}
	}
	if method == "POST" {
		if mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); strings.HasPrefix(mt, "multipart/") {
			mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
			for p, err := mr.NextPart(); err == nil; p, err = mr.NextPart() {
				if p.FormName() == "_method" {
					v, _ := io.ReadAll(p)
					method = strings.ToUpper(string(v))
				}
			}
		} else if v, err := url.ParseQuery(string(body)); (mt == "" || mt == "application/x-www-form-urlencoded") && err == nil && v.Get("_method") != "" {
			method = strings.ToUpper(v.Get("_method"))
		}
	}
	segs := strings.Split(target, "/")
	for i, s := range segs {
		segs[i], _, _ = strings.Cut(s, ";")
	}
	p := strings.Join(segs, "/")
	for i := 0; i < 2; i++ {
		p = decodeLeniently(p)
	}
	p = strings.NewReplacer("\\", "/", "\xc0\xae", ".", "\uff0e", ".", "\u2024", ".").Replace(p)
	if i := strings.IndexByte(p, ';'); i >= 0 {
		p = p[:i]
	}
	return method + " " + path.Clean("/"+p)
}

// decodeLeniently decodes each valid %XX of s and leaves the rest.
func decodeLeniently(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b = append(b, byte(v))
				i += 2
				continue
			}
		}
		b = append(b, s[i])
	}
	return string(b)
}

// rawExchange sends one request as the guest exactly as given, which
// Go's client would not, over HTTP/1.1 or HTTP/2 to host:443, and
// returns the status (0 when the stream or connection was refused) and
// body.
func rawExchange(t *testing.T, h *harness, proto, host, method, target string, hdr [][2]string, body string) (int, string) {
	t.Helper()
	if proto == "h1" {
		c, err := h.guestTLS(host, 443, host, "http/1.1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var b bytes.Buffer
		fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, target, host)
		for _, f := range hdr {
			fmt.Fprintf(&b, "%s: %s\r\n", f[0], f[1])
		}
		if body != "" {
			fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
		}
		b.WriteString("\r\n" + body)
		if _, err := c.Write(b.Bytes()); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err.Error()
		}
		out, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(out)
	}

	c, err := h.guestTLS(host, 443, host, "h2")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN %q", p)
	}
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range append([][2]string{{":method", method}, {":scheme", "https"}, {":authority", host}, {":path", target}}, hdr...) {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: body == "", EndHeaders: true})
	if body != "" {
		fr.WriteData(1, true, []byte(body))
	}
	dec := hpack.NewDecoder(4096, nil)
	status := 0
	var out bytes.Buffer
	for i := 0; i < 1000; i++ {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading frames: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.RSTStreamFrame, *http2.GoAwayFrame:
			return status, out.String()
		case *http2.HeadersFrame:
			hf, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range hf {
				if x.Name == ":status" {
					status, _ = strconv.Atoi(x.Value)
				}
			}
			if f.StreamEnded() {
				return status, out.String()
			}
		case *http2.DataFrame:
			out.Write(f.Data())
			if f.StreamEnded() {
				return status, out.String()
			}
		}
	}
	t.Fatal("no end of stream in 1000 frames")
	return 0, ""
}

// drain returns what the upstream has received so far.
func drain(seen chan received) []received {
	var out []received
	for {
		select {
		case r := <-seen:
			out = append(out, r)
		default:
			return out
		}
	}
}

// refusedByRule checks that the audit log holds n refusals naming the
// rule at main.hcl:line.
func refusedByRule(t *testing.T, h *harness, n, line int) {
	t.Helper()
	match := func(e audit.Entry) bool {
		return e.Decision == audit.DecisionDeny && e.RuleFile == "main.hcl" && e.RuleLine == line
	}
	got := 0
	for _, e := range h.entriesAfter(n, match) {
		if match(e) {
			got++
		}
	}
	if got < n {
		t.Errorf("the audit log holds %d refusals naming main.hcl:%d, want %d", got, line, n)
	}
}

// TestPathRuleBypassesRefused: under paths = ["/public/**"], every form of
// a path that a lenient server routes outside /public is refused with a
// 403 naming the rule, over HTTP/1.1 and HTTP/2, and never reaches the
// upstream; ordinary paths pass, and the upstream receives exactly the
// target that was judged.
func TestPathRuleBypassesRefused(t *testing.T) {
	pki := newUpstreamPKI(t)
	seen := make(chan received, 200)
	up := upstreamTLS(t, pki, lenientUpstream(seen), "a.test")
	rule := policy.AllowRule{Pattern: policy.MustHostPattern("a.test"), Paths: []string{"/public/**"}, Origin: origin("egress.public", 7)}
	h := newHarness(t, spec(pki, []policy.AllowRule{rule}, mapping("a.test", serverAddr(up))), nil, nil)

	attacks := []string{
		"/public/..;/admin",
		"/public/..;x=1/admin",
		"/public;/../admin",
		"/public/..%3B/admin",
		"/public/..%3b/admin",
		`/public/..\admin`,
		"/public/..%5Cadmin",
		"/public/..%5cadmin",
		"/public/%2e%2e/admin",
		"/public/%2E%2E/admin",
		"/public/.%2e/admin",
		"/public/%2e./admin",
		"/public/%2E%2e/admin",
		"/public/%252e%252e/admin",
		"/public/%252E%252E%252Fadmin",
		"/public/%c0%ae%c0%ae/admin",
		"/public/%EF%BC%8E%EF%BC%8E/admin",
		"/public/a%2F..%2F..%2Fadmin",
		"/public//../admin",
		"/public/x%00/../../admin",
		"https://a.test/public/..;/admin",
	}
	// Ordinary targets, and the target the upstream must receive.
	controls := [][2]string{
		{"/public/x", "/public/x"},
		{"/public/", "/public/"},
		{"/public/a%2Fb", "/public/a%2Fb"},
		{"/public/caf%C3%A9", "/public/caf%C3%A9"},
		{"/public/a.json", "/public/a.json"},
		// Characters Go's server re-escapes: judged, and sent, escaped.
		{`/public/a"b{`, "/public/a%22b%7B"},
		{"/public/x?q=1", "/public/x?q=1"},
	}
	refusals := 0
	for _, proto := range []string{"h1", "h2"} {
		for _, target := range attacks {
			code, body := rawExchange(t, h, proto, "a.test", "GET", target, nil, "")
			if code != 403 || !strings.Contains(body, "main.hcl:7") {
				t.Errorf("%s GET %s: %d %q, want a 403 naming main.hcl:7", proto, target, code, body)
			}
			refusals++
			for _, r := range drain(seen) {
				t.Errorf("%s GET %s reached the upstream: %v", proto, target, r)
			}
		}
		for _, c := range controls {
			code, body := rawExchange(t, h, proto, "a.test", "GET", c[0], nil, "")
			if code != 200 {
				t.Errorf("%s GET %s: %d %q", proto, c[0], code, body)
			}
			got := drain(seen)
			if len(got) != 1 || got[0].uri != c[1] {
				t.Errorf("%s GET %s: upstream received %v, want exactly %s", proto, c[0], got, c[1])
			}
		}
	}
	// Absolute form goes upstream in origin form, judged as such.
	code, body := rawExchange(t, h, "h1", "a.test", "GET", "https://a.test/public/y", nil, "")
	if got := drain(seen); code != 200 || len(got) != 1 || got[0].uri != "/public/y" {
		t.Errorf("GET https://a.test/public/y: %d %q, upstream received %v", code, body, got)
	}
	// "*" is no path: refused under a path rule. (OPTIONS * is answered
	// by Go's server itself and never reaches the rules or the upstream.)
	code, body = rawExchange(t, h, "h1", "a.test", "GET", "*", nil, "")
	if code != 403 || !strings.Contains(body, "main.hcl:7") {
		t.Errorf("GET *: %d %q", code, body)
	}
	refusals++
	rawExchange(t, h, "h1", "a.test", "OPTIONS", "*", nil, "")
	for _, r := range drain(seen) {
		t.Errorf("a * target reached the upstream: %v", r)
	}
	// HTTP/2 :path oddities: "*" and a relative path never reach the
	// upstream (Go's server refuses some before the rules see them); an
	// absolute URI goes upstream in origin form, judged so; "#" is no
	// fragment on the wire, so the ".." after it is a real segment.
	for _, tc := range []struct{ target, upstream string }{
		{"*", ""},
		{"public/x", ""},
		{"/public/x#frag/../../admin", ""},
		{"https://a.test/public/x", "/public/x"},
		{"https://a.test/public/..;/admin", ""},
	} {
		code, body := rawExchange(t, h, "h2", "a.test", "GET", tc.target, nil, "")
		got := drain(seen)
		switch {
		case tc.upstream == "" && (code == 200 || len(got) != 0):
			t.Errorf("h2 :path %s: %d %q, upstream received %v", tc.target, code, body, got)
		case tc.upstream != "" && (code != 200 || len(got) != 1 || got[0].uri != tc.upstream):
			t.Errorf("h2 :path %s: %d %q, upstream received %v, want exactly %s", tc.target, code, body, got, tc.upstream)
		}
	}
	refusedByRule(t, h, refusals, 7)
}

// TestMethodRuleOverridesRefused: under methods = ["GET"], a GET that asks
// the server to act as DELETE (by header, in any case, or by a _method
// parameter) and a lower-case method are refused with a 403 naming the
// rule, over HTTP/1.1 and HTTP/2, and never reach the upstream.
func TestMethodRuleOverridesRefused(t *testing.T) {
	pki := newUpstreamPKI(t)
	seen := make(chan received, 200)
	up := upstreamTLS(t, pki, lenientUpstream(seen), "a.test")
	rule := policy.AllowRule{Pattern: policy.MustHostPattern("a.test"), Methods: []string{"GET", "HEAD"}, Origin: origin("egress.read", 8)}
	h := newHarness(t, spec(pki, []policy.AllowRule{rule}, mapping("a.test", serverAddr(up))), nil, nil)

	type attack struct {
		method, target string
		hdr            [][2]string
	}
	attacks := map[string][]attack{
		"h1": {
			{"GET", "/items/1", [][2]string{{"X-HTTP-Method-Override", "DELETE"}}},
			{"GET", "/items/1", [][2]string{{"x-http-method-override", "DELETE"}}},
			{"GET", "/items/1", [][2]string{{"X-HTTP-Method", "DELETE"}}},
			{"GET", "/items/1", [][2]string{{"X-Method-Override", "DELETE"}}},
			{"GET", "/items/1", [][2]string{{"X_HTTP_METHOD_OVERRIDE", "DELETE"}}},
			{"GET", "/items/1?_method=DELETE", nil},
			{"GET", "/items/1?a=1&_METHOD=DELETE", nil},
			{"GET", "/items/1?%5Fmethod=DELETE", nil},
			{"GET", "/items/1?a=1;_method=DELETE", nil},
			{"get", "/items/1", nil},
			{"delete", "/items/1", nil},
		},
		"h2": {
			{"GET", "/items/1", [][2]string{{"x-http-method-override", "DELETE"}}},
			{"GET", "/items/1", [][2]string{{"x-http-method", "DELETE"}}},
			{"GET", "/items/1", [][2]string{{"x-method-override", "DELETE"}}},
			{"GET", "/items/1", [][2]string{{"x_http_method_override", "DELETE"}}},
			{"GET", "/items/1?_method=DELETE", nil},
			{"GET", "/items/1?_Method=DELETE", nil},
			{"get", "/items/1", nil},
		},
	}
	refusals := 0
	for _, proto := range []string{"h1", "h2"} {
		for _, a := range attacks[proto] {
			code, body := rawExchange(t, h, proto, "a.test", a.method, a.target, a.hdr, "")
			if code != 403 || !strings.Contains(body, "main.hcl:8") {
				t.Errorf("%s %s %s %v: %d %q, want a 403 naming main.hcl:8", proto, a.method, a.target, a.hdr, code, body)
			}
			refusals++
			for _, r := range drain(seen) {
				t.Errorf("%s %s %s %v reached the upstream: %v", proto, a.method, a.target, a.hdr, r)
			}
		}
		code, body := rawExchange(t, h, proto, "a.test", "GET", "/items/1?method=x", nil, "")
		if got := drain(seen); code != 200 || len(got) != 1 || got[0].route != "GET /items/1" {
			t.Errorf("%s plain GET: %d %q, upstream received %v", proto, code, body, got)
		}
	}
	refusedByRule(t, h, refusals, 8)
}

// TestGitPushDetectionRobust: under git_push = ["refs/heads/agent/*"], a
// push to main is held to the refs however the guest writes its method
// (lower or mixed case) and path (encoded, doubly encoded, with a path
// parameter, named by ?service=), over HTTP/1.1 and HTTP/2: git gets the
// refusal and the upstream gets nothing.
func TestGitPushDetectionRobust(t *testing.T) {
	pki := newUpstreamPKI(t)
	seen := make(chan received, 200)
	up := upstreamTLS(t, pki, lenientUpstream(seen), "git.test")
	rule := policy.AllowRule{Pattern: policy.MustHostPattern("git.test"), GitPush: []string{"refs/heads/agent/*"}, Origin: origin("egress.git", 12)}
	h := newHarness(t, spec(pki, []policy.AllowRule{rule}, mapping("git.test", serverAddr(up))), nil, nil)
	zero := strings.Repeat("0", 40)
	line := zero + " " + strings.Repeat("a", 40) + " refs/heads/main\x00report-status side-band-64k\n"
	push := fmt.Sprintf("%04x%s0000", len(line)+4, line)
	ctype := [][2]string{{"content-type", "application/x-git-receive-pack-request"}}
	for _, proto := range []string{"h1", "h2"} {
		for _, tc := range []struct {
			method, target string
			hdr            [][2]string
		}{
			{"post", "/repo.git/git-receive-pack", ctype},
			{"Post", "/repo.git/git-receive-pack", nil},
			{"post", "/repo.git/git-receive-pack", nil},
			{"POST", "/repo.git/git%252Dreceive-pack", nil},
			{"POST", "/repo.git/git-receive-pack;x=1", nil},
			{"POST", "/repo.git?service=git-receive-pack", nil},
			{"GET", "/repo.git/git-receive-pack", [][2]string{{"x-http-method-override", "POST"}}},
		} {
			code, body := rawExchange(t, h, proto, "git.test", tc.method, tc.target, tc.hdr, push)
			if code != 200 || !strings.Contains(body, "may update only refs/heads/agent/*") {
				t.Errorf("%s %s %s: %d %q, want git's refusal", proto, tc.method, tc.target, code, body)
			}
			for _, r := range drain(seen) {
				t.Errorf("%s %s %s: the upstream got the push: %v", proto, tc.method, tc.target, r)
			}
		}
		// A fetch is not a push.
		code, body := rawExchange(t, h, proto, "git.test", "GET", "/repo.git/info/refs?service=git-receive-pack", nil, "")
		if got := drain(seen); code != 200 || len(got) != 1 {
			t.Errorf("%s ref advertisement: %d %q, upstream received %v", proto, code, body, got)
		}
	}
}

// TestFormMethodOverrideRefused: under methods = ["POST"], a POST whose
// form body carries a _method field (URL-encoded or as a multipart part)
// is refused with a 403 naming the rule, over HTTP/1.1 and HTTP/2, and
// the upstream never gets a whole body to act on; other POST bodies pass.
func TestFormMethodOverrideRefused(t *testing.T) {
	pki := newUpstreamPKI(t)
	seen := make(chan received, 200)
	up := upstreamTLS(t, pki, lenientUpstream(seen), "a.test")
	rule := policy.AllowRule{Pattern: policy.MustHostPattern("a.test"), Methods: []string{"POST"}, Paths: []string{"/items/*"}, Origin: origin("egress.write", 9)}
	h := newHarness(t, spec(pki, []policy.AllowRule{rule}, mapping("a.test", serverAddr(up))), nil, nil)
	form := [][2]string{{"content-type", "application/x-www-form-urlencoded"}}
	mp := [][2]string{{"content-type", "multipart/form-data; boundary=XyZ"}}
	part := func(name, v string) string {
		return "--XyZ\r\nContent-Disposition: form-data; " + name + "\r\n\r\n" + v + "\r\n"
	}
	refusals := 0
	for _, proto := range []string{"h1", "h2"} {
		for _, tc := range []struct {
			hdr  [][2]string
			body string
		}{
			{form, "a=1&_method=DELETE"},
			{form, "_method=DELETE&a=1"},
			{form, "a=1&%5Fmethod=DELETE"},
			{form, "a=1;_METHOD=delete"},
			{nil, "_method=DELETE"},
			{[][2]string{{"content-type", "text/plain;;"}}, "_method=DELETE"},
			{mp, part(`name="a"`, "1") + part(`name="_method"`, "DELETE") + "--XyZ--\r\n"},
			{mp, part(`name=_method`, "DELETE") + "--XyZ--\r\n"},
			{mp, part(`name*=UTF-8''%5Fmethod`, "DELETE") + "--XyZ--\r\n"},
		} {
			code, body := rawExchange(t, h, proto, "a.test", "POST", "/items/1", tc.hdr, tc.body)
			if code != 403 || !strings.Contains(body, "main.hcl:9") {
				t.Errorf("%s POST %v %q: %d %q, want a 403 naming main.hcl:9", proto, tc.hdr, tc.body, code, body)
			}
			refusals++
			for _, r := range drain(seen) {
				t.Errorf("%s POST %q: the upstream acted on it: %v", proto, tc.body, r)
			}
		}
		for _, tc := range []struct {
			hdr  [][2]string
			body string
		}{
			{form, "a=_method&method=1"},
			{[][2]string{{"content-type", "application/json"}}, `{"text": "a=1&_method=DELETE"}`},
			{mp, part(`name="file"; filename="x.py"`, "self._method = 1\n_method=2") + "--XyZ--\r\n"},
			{form, strings.Repeat("x", 20000) + "=1&b=2"},
		} {
			code, body := rawExchange(t, h, proto, "a.test", "POST", "/items/1", tc.hdr, tc.body)
			if got := drain(seen); code != 200 || len(got) != 1 || got[0].route != "POST /items/1" {
				t.Errorf("%s POST %v %.40q: %d %q, upstream received %v", proto, tc.hdr, tc.body, code, body, got)
			}
		}
	}
	refusedByRule(t, h, refusals, 9)
}
