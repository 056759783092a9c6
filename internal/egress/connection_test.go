package egress

import (
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/policy"
)

// TestConnectionListedHeadersJudgedAsSent plays a guest that names
// Content-Type in its Connection header: the header is hop-by-hop then,
// and the proxy drops it on the way, so the upstream gets a POST without
// a Content-Type, which Rack parses as a form. The rules must judge the
// request without it too: a _method field in that body is refused under
// a method rule, as it is in a body without a Content-Type.
func TestConnectionListedHeadersJudgedAsSent(t *testing.T) {
	pki := newUpstreamPKI(t)
	seen := make(chan received, 20)
	up := upstreamTLS(t, pki, lenientUpstream(seen), "a.test")
	rule := policy.AllowRule{Pattern: policy.MustHostPattern("a.test"), Methods: []string{"POST"}, Paths: []string{"/items/*"}, Origin: origin("egress.write", 9)}
	h := newHarness(t, spec(pki, []policy.AllowRule{rule}, mapping("a.test", serverAddr(up))), nil, nil)
	for _, conn := range []string{"Content-Type", "content-type", "keep-alive, Content-Type"} {
		hdr := [][2]string{{"Content-Type", "application/json"}, {"Connection", conn}}
		code, body := rawExchange(t, h, "h1", "a.test", "POST", "/items/1", hdr, "_method=DELETE")
		if code != 403 || !strings.Contains(body, "main.hcl:9") {
			t.Errorf("POST with Connection: %s and a _method body: %d %q, want a 403 naming main.hcl:9", conn, code, body)
		}
		for _, r := range drain(seen) {
			t.Errorf("POST with Connection: %s: the upstream acted on it: %v", conn, r)
		}
	}
	// A JSON body whose Content-Type stays is no form.
	code, body := rawExchange(t, h, "h1", "a.test", "POST", "/items/1", [][2]string{{"Content-Type", "application/json"}, {"Connection", "keep-alive"}}, `{"a": "_method=DELETE"}`)
	if got := drain(seen); code != 200 || len(got) != 1 || got[0].route != "POST /items/1" {
		t.Errorf("POST JSON: %d %q, upstream received %v", code, body, got)
	}
}
