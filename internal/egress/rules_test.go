package egress

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/egress/gitpush"
	"github.com/sbx-dev/sbx/policy"
	"github.com/sbx-dev/sbx/policy/match"
)

func TestPathPatterns(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		path    string
		want    bool
	}{
		{"/v1/**", "/v1", true},
		{"/v1/**", "/v1/", true},
		{"/v1/**", "/v1/messages", true},
		{"/v1/**", "/v1/a/b/c", true},
		{"/v1/**", "/v10/x", false},
		{"/v1/**", "/v2/v1/x", false},
		{"/v1/*", "/v1/models", true},
		{"/v1/*", "/v1/models/x", false},
		{"/v1/*/count", "/v1/abc/count", true},
		{"/v1/*/count", "/v1/count", false},
		{"/repos/*.git/**", "/repos/x.git/info/refs", true},
		{"/repos/*.git/**", "/repos/x.gitx/info/refs", false},
		{"/a/**/z", "/a/z", true},
		{"/a/**/z", "/a/b/c/z", true},
		{"/a/**/z", "/a/b/c/zz", false},
		{"/exact", "/exact", true},
		{"/exact", "/exact/", false},
		{"/exact", "/exactly", false},
		{"/**", "/anything/at/all", true},
		{"/a*b*c", "/aXbYc", true},
		{"/a*b*c", "/aXbY", false},
	} {
		pp, err := match.CompilePath(tc.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tc.pattern, err)
		}
		if got := pp.Match(tc.path); got != tc.want {
			t.Errorf("%s ~ %s = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
	for _, bad := range []string{"v1", "/v1/a**", "/v1/../x", "/./x"} {
		if _, err := match.CompilePath(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestCheckRequest is the table of request-rule decisions: path forms
// that mean another path to some server, method overrides, method case
// and git push detection, each under the rule that should refuse it and
// beside one that leaves it alone.
func TestCheckRequest(t *testing.T) {
	p, err := Compile(policy.Sandbox{Allow: []policy.AllowRule{
		{Pattern: policy.MustHostPattern("api.test"), Paths: []string{"/public/**"}, Origin: origin("egress.paths", 7)},
		{Pattern: policy.MustHostPattern("api.test"), Methods: []string{"POST"}, Paths: []string{"/upload/*"}, Origin: origin("egress.post", 8)},
		{Pattern: policy.MustHostPattern("get.test"), Methods: []string{"GET", "HEAD"}, Origin: origin("egress.get", 9)},
		{Pattern: policy.MustHostPattern("open.test"), Origin: origin("egress.open", 10)},
		{Pattern: policy.MustHostPattern("git.test"), GitPush: []string{"refs/heads/agent/*"}, Origin: origin("egress.git", 11)},
		{Pattern: policy.MustHostPattern("gitp.test"), Methods: []string{"GET", "POST"}, Paths: []string{"/org/repo.git/**"}, GitPush: []string{"refs/heads/agent/*"}, Origin: origin("egress.gitp", 12)},
	}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h[kv[i]] = []string{kv[i+1]}
		}
		return h
	}
	for _, tc := range []struct {
		host, method, target, query string
		header                      http.Header
		receivePack                 bool
		// want is "" for allowed, else a part of the reason; line is the
		// rule the decision names.
		want string
		line int
	}{
		{host: "api.test", method: "GET", target: "/public/x", line: 7},
		{host: "api.test", method: "GET", target: "/public/", line: 7},
		{host: "api.test", method: "GET", target: "/public/a%2Fb", line: 7},
		{host: "api.test", method: "DELETE", target: "/public/x", line: 7},
		{host: "api.test", method: "GET", target: "/admin", want: "is not allowed by egress.paths (main.hcl:7), which allows only paths /public/**", line: 7},
		{host: "api.test", method: "GET", target: "/public/..;/admin", want: `";", a path parameter`, line: 7},
		{host: "api.test", method: "GET", target: "/public;/../admin", want: `";"`, line: 7},
		{host: "api.test", method: "GET", target: "/public/..%3B/admin", want: `encoded ";"`, line: 7},
		{host: "api.test", method: "GET", target: "/public/..\\admin", want: `"\"`, line: 7},
		{host: "api.test", method: "GET", target: "/public/..%5Cadmin", want: `encoded "\"`, line: 7},
		{host: "api.test", method: "GET", target: "/public/%2e%2e/admin", want: `encoded "."`, line: 7},
		{host: "api.test", method: "GET", target: "/public/%2E%2E/admin", want: `encoded "."`, line: 7},
		{host: "api.test", method: "GET", target: "/public/.%2e/admin", want: `encoded "."`, line: 7},
		{host: "api.test", method: "GET", target: "/public/%2e./admin", want: `encoded "."`, line: 7},
		{host: "api.test", method: "GET", target: "/public/%2E%2e/admin", want: `encoded "."`, line: 7},
		{host: "api.test", method: "GET", target: "/public/%252e%252e/admin", want: `encoded "%"`, line: 7},
		{host: "api.test", method: "GET", target: "/public/a%2F..%2F..%2Fadmin", want: `makes a ".." segment`, line: 7},
		{host: "api.test", method: "GET", target: "/public/a%00", want: "control byte 0x00", line: 7},
		{host: "api.test", method: "GET", target: "/public/a%0d%0aX:%20y", want: "control byte 0x0d", line: 7},
		{host: "api.test", method: "GET", target: "/public//../admin", want: "empty segment", line: 7},
		{host: "api.test", method: "GET", target: "//public/x", want: "empty segment", line: 7},
		{host: "api.test", method: "OPTIONS", target: "*", want: "not a path", line: 7},
		{host: "api.test", method: "GET", target: "x:y", want: "not an absolute path", line: 7},
		{host: "api.test", method: "GET", target: "/public/%EF%BC%8E%EF%BC%8E/admin", want: "U+FF0E", line: 7},
		// Methods: exact case, no overrides.
		{host: "api.test", method: "POST", target: "/upload/f", line: 8},
		{host: "api.test", method: "post", target: "/upload/f", want: `methods are case-sensitive, and "post" is not "POST"`, line: 8},
		{host: "api.test", method: "Post", target: "/upload/f", want: "case-sensitive", line: 8},
		{host: "api.test", method: "POST", target: "/upload/f", header: hdr("X-Http-Method-Override", "DELETE"), want: "X-Http-Method-Override header", line: 8},
		{host: "get.test", method: "GET", target: "/x", line: 9},
		{host: "get.test", method: "GET", target: "/x", header: hdr("X-Http-Method-Override", "DELETE"), want: "which servers read as another method", line: 9},
		{host: "get.test", method: "GET", target: "/x", header: hdr("X-Http-Method", "DELETE"), want: "X-Http-Method header", line: 9},
		{host: "get.test", method: "GET", target: "/x", header: hdr("X-Method-Override", "PUT"), want: "X-Method-Override header", line: 9},
		{host: "get.test", method: "GET", target: "/x", header: hdr("X_http_method_override", "PUT"), want: "X_http_method_override header", line: 9},
		{host: "get.test", method: "GET", target: "/x", query: "a=1&_method=DELETE", want: "_method query parameter", line: 9},
		{host: "get.test", method: "GET", target: "/x", query: "_METHOD=DELETE", want: "_method query parameter", line: 9},
		{host: "get.test", method: "GET", target: "/x", query: "a=1;_Method=DELETE", want: "_method query parameter", line: 9},
		{host: "get.test", method: "GET", target: "/x", query: "%5Fmethod=DELETE", want: "_method query parameter", line: 9},
		{host: "get.test", method: "GET", target: "/x", query: "%255Fmethod=DELETE", want: "_method query parameter", line: 9},
		{host: "get.test", method: "GET", target: "/x", query: ".method=DELETE", want: "_method query parameter", line: 9},
		{host: "get.test", method: "GET", target: "/x", query: "_method[]=DELETE", want: "_method query parameter", line: 9},
		{host: "get.test", method: "GET", target: "/x", query: "x=_method&method=1", line: 9},
		{host: "get.test", method: "get", target: "/x", want: "case-sensitive", line: 9},
		{host: "api.test", method: "POST", target: "/upload/f", header: hdr("Content-Encoding", "gzip"), want: "a gzip-encoded form body cannot be checked", line: 8},
		{host: "api.test", method: "POST", target: "/upload/f", header: hdr("Content-Encoding", "gzip", "Content-Type", "application/json"), line: 8},
		{host: "get.test", method: "DELETE", target: "/x", want: "is not allowed by egress.get (main.hcl:9), which allows only methods GET, HEAD", line: 9},
		// No method rule: overrides and any case pass; no path rule: any
		// path form passes.
		{host: "open.test", method: "post", target: "/public/..;/admin", header: hdr("X-Http-Method-Override", "DELETE"), query: "_method=PUT", line: 10},
		{host: "other.test", method: "GET", target: "/", want: "not in any egress allow rule"},
		// git push: detected whatever the case, and held to the refs.
		{host: "git.test", method: "post", target: "/repo.git/git-receive-pack", receivePack: true, line: 11},
		{host: "gitp.test", method: "post", target: "/org/repo.git/git-receive-pack", receivePack: true, want: "case-sensitive", line: 12},
	} {
		q := requestForm{method: tc.method, target: tc.target, query: tc.query, header: tc.header, receivePack: tc.receivePack}
		v := p.checkRequest(tc.host, q)
		name := fmt.Sprintf("%s %s %s?%s %v", tc.host, tc.method, tc.target, tc.query, tc.header)
		switch {
		case tc.want == "" && !v.allowed:
			t.Errorf("%s: refused: %s", name, v.reason)
		case tc.want != "" && v.allowed:
			t.Errorf("%s: allowed, want a refusal saying %s", name, tc.want)
		case tc.want != "" && !strings.Contains(v.reason, tc.want):
			t.Errorf("%s: reason %q, want it to say %s", name, v.reason, tc.want)
		}
		if v.rule.Line != tc.line {
			t.Errorf("%s: names rule at line %d, want %d (%s)", name, v.rule.Line, tc.line, v.reason)
		}
		if tc.receivePack && v.allowed && v.pushRefs == nil {
			t.Errorf("%s: a push under a git_push rule is not held to its refs", name)
		}
	}
	// Which bodies are read for a _method field: POST forms under method
	// lists only.
	for _, tc := range []struct {
		host   string
		header http.Header
		want   bool
	}{
		{"api.test", nil, true},
		{"api.test", hdr("Content-Type", "application/x-www-form-urlencoded"), true},
		{"api.test", hdr("Content-Type", "multipart/form-data; boundary=x"), true},
		{"api.test", hdr("Content-Type", "application/json"), false},
		{"open.test", nil, false},
	} {
		v := p.checkRequest(tc.host, requestForm{method: "POST", target: "/upload/f", header: tc.header})
		if !v.allowed || (v.scanForm != "") != tc.want || tc.want && !strings.Contains(v.scanForm, "main.hcl:8") {
			t.Errorf("POST to %s with %v: allowed %v, scanForm %q, want a scan: %v", tc.host, tc.header, v.allowed, v.scanForm, tc.want)
		}
	}
}

// TestIsReceivePackForms: every form of a push a git server may route is
// held to the rule's refs, and fetches are not.
func TestIsReceivePackForms(t *testing.T) {
	for _, tc := range []struct {
		method, target, query, ctype string
		want                         bool
	}{
		{"POST", "/repo.git/git-receive-pack", "", "", true},
		{"post", "/repo.git/git-receive-pack", "", "", true},
		{"Post", "/repo.git/git-receive-pack", "", "", true},
		{"PUT", "/repo.git/git-receive-pack", "", "", true},
		{"POST", "/repo.git/GIT-RECEIVE-PACK/", "", "", true},
		{"POST", "/repo.git/git%2Dreceive-pack", "", "", true},
		{"POST", "/repo.git/git%252dreceive%252Dpack", "", "", true},
		{"POST", "/repo.git/git-receive-pack;x=1", "", "", true},
		{"POST", "/repo.git/git_receive_pack", "", "", true},
		{"POST", "/repo.git/%67it-receive-pack%zz", "", "", true},
		{"POST", "/repo.git", "service=git-receive-pack", "", true},
		{"POST", "/push", "", "application/x-git-receive-pack-request", true},
		{"POST", "/push", "", "Application/X-Git-Receive-Pack-Request; charset=x", true},
		{"POST", "/repo.git/git-upload-pack", "", "application/x-git-upload-pack-request", false},
		{"GET", "/repo.git/info/refs", "service=git-receive-pack", "", false},
		{"get", "/repo.git/info/refs", "service=git-receive-pack", "", false},
		{"HEAD", "/repo.git/git-receive-pack", "", "", false},
	} {
		if got := gitpush.IsReceivePack(tc.method, tc.target, tc.query, tc.ctype); got != tc.want {
			t.Errorf("IsReceivePack(%s %s?%s %q) = %v, want %v", tc.method, tc.target, tc.query, tc.ctype, got, tc.want)
		}
	}
}

func TestPolicyDecisions(t *testing.T) {
	p, err := Compile(policy.Sandbox{
		Allow: []policy.AllowRule{
			allow("api.test", 1),
			allow("*.pinned.test", 2),
			{Pattern: policy.MustHostPattern("*.pinned.test"), Passthrough: true, Origin: origin("egress.p", 3)},
			{Pattern: policy.MustHostPattern("only.pinned.test"), Passthrough: true, Origin: origin("egress.p", 4)},
			{Pattern: policy.MustHostPattern("ssh.test"), Passthrough: true, Origin: origin("egress.p", 5)},
		},
		TCP:   []policy.TCPRule{{Dest: policy.HostPort{Host: "ssh.test", Port: 22}, Origin: origin("egress.t", 6)}},
		Hosts: []policy.HostMapping{mapping("mapped.test", "127.0.0.1:9")},
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		port     uint16
		resolves bool
		kind     flowKind
	}{
		{"api.test", 443, true, kindHTTP},
		{"API.TEST.", 80, true, kindHTTP},
		{"api.test", 8443, true, kindDeny},
		{"a.pinned.test", 443, true, kindHTTP}, // an inspecting rule matches too
		{"ssh.test", 443, true, kindPassthrough},
		{"ssh.test", 80, true, kindHTTP}, // passthrough is for TLS only
		{"ssh.test", 22, true, kindTCP},
		{"ssh.test", 23, true, kindDeny},
		{"mapped.test", 443, false, kindDeny}, // a mapping alone allows nothing, and DNS does not answer it
		{"other.test", 443, false, kindDeny},
		{"", 443, false, kindDeny},
		{"pinned.test", 443, false, kindDeny},
	} {
		if got := p.Resolves(tc.name); got != tc.resolves {
			t.Errorf("Resolves(%q) = %v", tc.name, got)
		}
		if got := p.flowKind(canonicalName(tc.name), tc.port); got != tc.kind {
			t.Errorf("flowKind(%q, %d) = %v, want %v", tc.name, tc.port, got, tc.kind)
		}
		if got := p.Accepts(tc.name, tc.port); got != (tc.kind != kindDeny) {
			t.Errorf("Accepts(%q, %d) = %v", tc.name, tc.port, got)
		}
	}
}

// TestMethodAndPathRules checks request rules end to end, including
// paths that mean one thing to the rule and another to a normalising
// upstream.
func TestMethodAndPathRules(t *testing.T) {
	pki := newUpstreamPKI(t)
	seen := make(chan string, 100)
	up := upstreamTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Method + " " + r.URL.EscapedPath()
	}), "api.test")
	rules := []policy.AllowRule{
		{Pattern: policy.MustHostPattern("api.test"), Methods: []string{"GET", "HEAD"}, Paths: []string{"/v1/**"}, Origin: origin("egress.read", 7)},
		{Pattern: policy.MustHostPattern("api.test"), Methods: []string{"post"}, Paths: []string{"/upload/*"}, Origin: origin("egress.write", 8)},
	}
	h := newHarness(t, spec(pki, rules, mapping("api.test", serverAddr(up))), nil, nil)
	c := h.client(true)
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/v1/models", 200},
		{"HEAD", "/v1", 200},
		{"POST", "/upload/file", 200},
		{"POST", "/v1/messages", 403},
		{"DELETE", "/v1/models", 403},
		{"GET", "/v2/models", 403},
		{"GET", "/upload/file", 403},
		{"POST", "/upload/a/b", 403},
	} {
		res, body := do(t, c, mustRequest(t, tc.method, "https://api.test"+tc.path, ""))
		if res.StatusCode != tc.want {
			t.Errorf("%s %s: %d %q, want %d", tc.method, tc.path, res.StatusCode, body, tc.want)
		}
		if tc.want == 403 && !strings.Contains(body, "main.hcl:7") {
			t.Errorf("%s %s: reason %q does not name the rule", tc.method, tc.path, body)
		}
	}
	// Raw request lines: Go's client would not send these as written.
	for _, target := range []string{"/v1/../admin", "/v1/%2e%2e/admin", "/v1/%2E%2E/admin", "/v1//x", "/v1/a%2f..%2fadmin", "/v1/..;/admin", "/v1/./x", "*"} {
		tc, err := h.guestTLS("api.test", 443, "api.test", "http/1.1")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(tc, "GET %s HTTP/1.1\r\nHost: api.test\r\n\r\n", target)
		res, err := http.ReadResponse(bufio.NewReader(tc), nil)
		tc.Close()
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		if res.StatusCode != 403 && res.StatusCode != 400 {
			t.Errorf("GET %s: %d, want a refusal", target, res.StatusCode)
		}
	}
	close(seen)
	var got []string
	for s := range seen {
		got = append(got, s)
	}
	if strings.Join(got, ",") != "GET /v1/models,HEAD /v1,POST /upload/file" {
		t.Errorf("upstream saw %v", got)
	}
}
