package egress

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/policy"
)

// rewriteRoutingUpstream routes a request the way IIS's URL Rewrite
// module, Zend Framework 1 and Symfony before 2.8.44 did: by the
// X-Original-URL or X-Rewrite-URL header when the request carries one
// (the name read as a CGI variable, so "_" for "-" too), by its target
// otherwise. It records each route it acts on.
func rewriteRoutingUpstream(seen chan<- string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := r.URL.Path
		for k, v := range r.Header {
			switch strings.ReplaceAll(strings.ToLower(k), "_", "-") {
			case "x-original-url", "x-rewrite-url":
				route = v[0]
			}
		}
		select {
		case seen <- route:
		default:
		}
		io.WriteString(w, route)
	})
}

// TestPathRuleRewriteHeadersRefused: under paths = ["/public/**"], a
// request to /public/x that names another path in X-Original-URL or
// X-Rewrite-URL (in any case, "_" for "-") is refused with a 403 naming
// the rule, over HTTP/1.1 and HTTP/2, and never reaches the upstream; a
// rule without paths lets those headers through.
func TestPathRuleRewriteHeadersRefused(t *testing.T) {
	pki := newUpstreamPKI(t)
	seen := make(chan string, 100)
	up := upstreamTLS(t, pki, rewriteRoutingUpstream(seen), "a.test", "b.test")
	rules := []policy.AllowRule{
		{Pattern: policy.MustHostPattern("a.test"), Paths: []string{"/public/**"}, Origin: origin("egress.public", 7)},
		{Pattern: policy.MustHostPattern("b.test"), Methods: []string{"GET"}, Origin: origin("egress.any", 8)},
	}
	h := newHarness(t, spec(pki, rules, mapping("a.test", serverAddr(up)), mapping("b.test", serverAddr(up))), nil, nil)
	var refusals int
	for _, proto := range []string{"h1", "h2"} {
		for _, name := range []string{"X-Original-URL", "x-original-url", "X-Rewrite-Url", "x_original_url", "X_REWRITE_URL"} {
			if proto == "h2" && strings.ContainsAny(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
				continue // HTTP/2 header names are lower case
			}
			code, body := rawExchange(t, h, proto, "a.test", "GET", "/public/x", [][2]string{{name, "/admin"}}, "")
			if code != 403 || !strings.Contains(body, "main.hcl:7") {
				t.Errorf("%s GET /public/x with %s: /admin: %d %q, want a 403 naming main.hcl:7", proto, name, code, body)
			}
			refusals++
			select {
			case r := <-seen:
				t.Errorf("%s GET /public/x with %s reached the upstream, routed as %s", proto, name, r)
			default:
			}
		}
		if code, body := rawExchange(t, h, proto, "a.test", "GET", "/public/x", nil, ""); code != 200 || body != "/public/x" {
			t.Errorf("%s GET /public/x: %d %q", proto, code, body)
		}
		<-seen
		if code, body := rawExchange(t, h, proto, "b.test", "GET", "/x", [][2]string{{"x-original-url", "/y"}}, ""); code != 200 || body != "/y" {
			t.Errorf("%s GET b.test/x with x-original-url under a rule without paths: %d %q", proto, code, body)
		}
		<-seen
	}
	refusedByRule(t, h, refusals, 7)
}
