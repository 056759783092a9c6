package egress

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/policy"
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
		pp, err := parsePathPattern(tc.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tc.pattern, err)
		}
		if got := pp.match(tc.path); got != tc.want {
			t.Errorf("%s ~ %s = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
	for _, bad := range []string{"v1", "/v1/a**", "/v1/../x", "/./x"} {
		if _, err := parsePathPattern(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestCanonicalPath(t *testing.T) {
	for _, tc := range []struct {
		decoded, escaped string
		want             bool
	}{
		{"/v1/x", "/v1/x", true},
		{"/v1/x/", "/v1/x/", true},
		{"/", "/", true},
		{"/v1/../admin", "/v1/../admin", false},
		{"/v1/./x", "/v1/./x", false},
		{"/v1//x", "/v1//x", false},
		{"/v1/../admin", "/v1/%2e%2e/admin", false},
		{"/v1/a/b", "/v1/a%2Fb", false},
		{"/v1/a\\..\\b", "/v1/a%5C..%5Cb", false},
	} {
		if got := canonicalPath(tc.decoded, tc.escaped); got != tc.want {
			t.Errorf("canonicalPath(%q, %q) = %v, want %v", tc.decoded, tc.escaped, got, tc.want)
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
		{"mapped.test", 443, true, kindDeny}, // a mapping alone allows nothing
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
	for _, target := range []string{"/v1/../admin", "/v1/%2e%2e/admin", "/v1/%2E%2E/admin", "/v1//x", "/v1/a%2fb", "/v1/./x", "*"} {
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
