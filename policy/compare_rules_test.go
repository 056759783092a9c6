package policy_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sbx-dev/sbx/policy"
)

// rule makes an allow rule; edit sets its mode.
func rule(pattern string, edit func(r *policy.AllowRule)) policy.AllowRule {
	r := policy.AllowRule{Pattern: policy.MustHostPattern(pattern), Origin: policy.Origin{Block: "egress.git", File: "main.hcl", Line: 7}}
	if edit != nil {
		edit(&r)
	}
	return r
}

func passthrough(r *policy.AllowRule) { r.Passthrough = true }

func methods(ms ...string) func(r *policy.AllowRule) {
	return func(r *policy.AllowRule) { r.Methods = ms }
}

func paths(ps ...string) func(r *policy.AllowRule) {
	return func(r *policy.AllowRule) { r.Paths = ps }
}

func gitPush(ps ...string) func(r *policy.AllowRule) {
	return func(r *policy.AllowRule) { r.GitPush = ps }
}

func both(fs ...func(r *policy.AllowRule)) func(r *policy.AllowRule) {
	return func(r *policy.AllowRule) {
		for _, f := range fs {
			f(r)
		}
	}
}

// testCA makes a CA certificate named cn, as a PEM CA.
func testCA(t *testing.T, path, cn string) policy.CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return policy.CA{Path: path, PEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), Origin: policy.Origin{Block: "egress.corp", File: "main.hcl", Line: 4}}
}

func TestCompareRequestRules(t *testing.T) {
	const (
		W = policy.Widen
		N = policy.Narrow
		Z = policy.Neutral
		A = policy.RuleAdded
		R = policy.RuleRemoved
		M = policy.RuleModified
	)
	pol := func(rs ...policy.AllowRule) policy.Sandbox { return policy.Sandbox{Allow: rs} }
	tests := []struct {
		name     string
		old, new policy.Sandbox
		want     []short
	}{
		{name: "unchanged modes",
			old: pol(rule("github.com", both(methods("GET"), paths("/a/**"), gitPush("refs/heads/agent/*"))), rule("pinned.test", passthrough)),
			new: pol(rule("github.com", both(methods("GET"), paths("/a/**"), gitPush("refs/heads/agent/*"))), rule("pinned.test", passthrough))},
		{name: "passthrough turned on",
			old: pol(rule("pinned.test", nil)), new: pol(rule("pinned.test", passthrough)),
			want: []short{{W, M, "allow.passthrough", "pinned.test", "requests to host pinned.test are no longer inspected (passthrough): request rules and secrets stop applying, and domain fronting becomes possible"}}},
		{name: "passthrough turned on drops request rules",
			old: pol(rule("pinned.test", both(methods("GET"), gitPush("refs/heads/a/*")))), new: pol(rule("pinned.test", passthrough)),
			want: []short{{W, M, "allow.passthrough", "pinned.test", `requests to host pinned.test are no longer inspected (passthrough): request rules and secrets stop applying, and domain fronting becomes possible; dropped: method GET; git push ref "refs/heads/a/*"`}}},
		{name: "passthrough turned off",
			old: pol(rule("*.pinned.test", passthrough)), new: pol(rule("*.pinned.test", nil)),
			want: []short{{N, M, "allow.passthrough", "*.pinned.test", "requests to hosts matching *.pinned.test are inspected again (no longer passthrough)"}}},
		{name: "passthrough off and methods limited",
			old: pol(rule("pinned.test", passthrough)), new: pol(rule("pinned.test", methods("GET"))),
			want: []short{
				{N, M, "allow.passthrough", "pinned.test", "requests to host pinned.test are inspected again (no longer passthrough)"},
				{N, A, "allow.methods", "pinned.test", "requests to host pinned.test limited to method GET"},
			}},
		{name: "methods limited",
			old: pol(rule("github.com", nil)), new: pol(rule("github.com", methods("POST", "GET"))),
			want: []short{{N, A, "allow.methods", "github.com", "requests to host github.com limited to methods GET, POST"}}},
		{name: "methods no longer limited",
			old: pol(rule("github.com", methods("GET"))), new: pol(rule("github.com", nil)),
			want: []short{{W, R, "allow.methods", "github.com", "requests to host github.com no longer limited to method GET"}}},
		{name: "method added and removed",
			old: pol(rule("github.com", methods("GET", "PUT"))), new: pol(rule("github.com", methods("GET", "DELETE", "POST"))),
			want: []short{
				{W, A, "allow.methods", "github.com", "requests to host github.com may also use methods DELETE, POST"},
				{N, R, "allow.methods", "github.com", "requests to host github.com may no longer use method PUT"},
			}},
		{name: "paths limited",
			old: pol(rule("api.test", nil)), new: pol(rule("api.test", paths("/v1/**"))),
			want: []short{{N, A, "allow.paths", "api.test", `requests to host api.test limited to path "/v1/**"`}}},
		{name: "paths no longer limited",
			old: pol(rule("api.test", paths("/v1/**", "/health"))), new: pol(rule("api.test", nil)),
			want: []short{{W, R, "allow.paths", "api.test", `requests to host api.test no longer limited to paths "/health", "/v1/**"`}}},
		{name: "path list grows",
			old: pol(rule("api.test", paths("/v1/**"))), new: pol(rule("api.test", paths("/v1/**", "/v2/**"))),
			want: []short{{W, A, "allow.paths", "api.test", `requests to host api.test may also go to path "/v2/**"`}}},
		{name: "path broadened, compared as sets",
			old: pol(rule("api.test", paths("/v1/models"))), new: pol(rule("api.test", paths("/v1/**"))),
			want: []short{
				{W, A, "allow.paths", "api.test", `requests to host api.test may also go to path "/v1/**"`},
				{N, R, "allow.paths", "api.test", `requests to host api.test may no longer go to path "/v1/models"`},
			}},
		{name: "git push limited",
			old: pol(rule("github.com", nil)), new: pol(rule("github.com", gitPush("refs/heads/agent/*"))),
			want: []short{{N, A, "allow.git_push", "github.com", `git pushes to host github.com limited to ref "refs/heads/agent/*"`}}},
		{name: "git push widened",
			old: pol(rule("github.com", gitPush("refs/heads/agent/*"))), new: pol(rule("github.com", gitPush("refs/heads/agent/*", "refs/heads/main"))),
			want: []short{{W, A, "allow.git_push", "github.com", `git pushes to host github.com may also update ref "refs/heads/main"`}}},
		{name: "git push narrowed",
			old: pol(rule("github.com", gitPush("refs/heads/**"))), new: pol(rule("github.com", gitPush("refs/heads/agent/*"))),
			want: []short{
				{W, A, "allow.git_push", "github.com", `git pushes to host github.com may also update ref "refs/heads/agent/*"`},
				{N, R, "allow.git_push", "github.com", `git pushes to host github.com may no longer update ref "refs/heads/**"`},
			}},
		{name: "git push no longer limited",
			old: pol(rule("github.com", gitPush("refs/heads/agent/*"))), new: pol(rule("github.com", nil)),
			want: []short{{W, R, "allow.git_push", "github.com", `git pushes to host github.com no longer limited to ref "refs/heads/agent/*"`}}},
		{name: "passthrough host added",
			old: pol(), new: pol(rule("pinned.test", passthrough)),
			want: []short{{W, A, "allow", "pinned.test", "adds host pinned.test, passthrough: not inspected, so domain fronting is possible"}}},
		{name: "restricted host added",
			old: pol(), new: pol(rule("github.com", both(methods("GET", "POST"), paths("/org/repo.git/**"), gitPush("refs/heads/agent/*")))),
			want: []short{{W, A, "allow", "github.com", `adds host github.com (methods GET, POST; path "/org/repo.git/**"; git push ref "refs/heads/agent/*")`}}},
		{name: "restricted host removed",
			old: pol(rule("github.com", methods("GET"))), new: pol(),
			want: []short{{N, R, "allow", "github.com", "removes host github.com"}}},
		// A request passes when any matching rule admits it, and a
		// connection is passthrough only when every matching rule is: a
		// narrower rule under an unrestricted, inspected one changes
		// nothing (lang warns about it).
		{name: "exact restricted rule under an unrestricted wildcard",
			old: pol(rule("*.example.com", nil)), new: pol(rule("*.example.com", nil), rule("api.example.com", methods("GET"))),
			want: []short{{Z, A, "allow", "api.example.com", "adds api.example.com, already allowed by *.example.com"}}},
		{name: "exact passthrough under an inspected wildcard",
			old: pol(rule("*.example.com", nil)), new: pol(rule("*.example.com", nil), rule("pinned.example.com", passthrough)),
			want: []short{{Z, A, "allow", "pinned.example.com", "adds pinned.example.com, already allowed by *.example.com"}}},
		{name: "exact restricted rule removed from under an unrestricted wildcard",
			old: pol(rule("*.example.com", nil), rule("api.example.com", methods("GET"))), new: pol(rule("*.example.com", nil)),
			want: []short{{Z, R, "allow", "api.example.com", "removes api.example.com, still allowed by *.example.com"}}},
		{name: "exact rule adds to a restricted wildcard's methods",
			old: pol(rule("*.example.com", methods("GET"))), new: pol(rule("*.example.com", methods("GET")), rule("api.example.com", methods("POST"))),
			want: []short{
				{Z, A, "allow", "api.example.com", "adds api.example.com, already allowed by *.example.com"},
				{W, A, "allow.methods", "api.example.com", "requests to host api.example.com may also use method POST"},
			}},
		{name: "exact unrestricted rule under a restricted wildcard",
			old: pol(rule("*.example.com", methods("GET"))), new: pol(rule("*.example.com", methods("GET")), rule("api.example.com", nil)),
			want: []short{
				{Z, A, "allow", "api.example.com", "adds api.example.com, already allowed by *.example.com"},
				{W, R, "allow.methods", "api.example.com", "requests to host api.example.com no longer limited to method GET"},
			}},
		{name: "passthrough wildcard over a passthrough exact rule",
			old: pol(rule("*.example.com", passthrough)), new: pol(rule("*.example.com", passthrough), rule("api.example.com", nil)),
			want: []short{
				{Z, A, "allow", "api.example.com", "adds api.example.com, already allowed by *.example.com"},
				{N, M, "allow.passthrough", "api.example.com", "requests to host api.example.com are inspected again (no longer passthrough)"},
			}},
		// Each rule admits the product of its own lists: GET anywhere
		// beside POST to one path does not let POST go anywhere, so
		// dropping the narrower rule's paths widens.
		{name: "overlapping rules: the narrower one loses its paths",
			old:  pol(rule("*.github.com", methods("GET")), rule("api.github.com", both(methods("POST"), paths("/repos/org/repo/issues")))),
			new:  pol(rule("*.github.com", methods("GET")), rule("api.github.com", methods("POST"))),
			want: []short{{W, R, "allow.paths", "api.github.com", `POST requests to host api.github.com no longer limited to path "/repos/org/repo/issues"`}}},
		{name: "overlapping rules: the narrower one gains its paths",
			old:  pol(rule("*.github.com", methods("GET")), rule("api.github.com", methods("POST"))),
			new:  pol(rule("*.github.com", methods("GET")), rule("api.github.com", both(methods("POST"), paths("/repos/org/repo/issues")))),
			want: []short{{N, A, "allow.paths", "api.github.com", `POST requests to host api.github.com limited to path "/repos/org/repo/issues"`}}},
		{name: "overlapping rules: a path another rule covers",
			old: pol(rule("*.github.com", paths("/a/**")), rule("api.github.com", both(methods("POST"), paths("/b")))),
			new: pol(rule("*.github.com", paths("/a/**")), rule("api.github.com", both(methods("POST"), paths("/b", "/a/x")))),
		},
		// A push passes with the refs of the rules that admit it; one of
		// them without git_push lifts the limit.
		{name: "overlapping rules: a broader rule admits the pushes",
			old: pol(rule("*.example.com", methods("GET")), rule("api.example.com", both(methods("POST"), gitPush("refs/heads/agent/*")))),
			new: pol(rule("*.example.com", methods("GET", "POST")), rule("api.example.com", both(methods("POST"), gitPush("refs/heads/agent/*")))),
			want: []short{
				{W, A, "allow.methods", "*.example.com", "requests to hosts matching *.example.com may also use method POST"},
				{W, R, "allow.git_push", "api.example.com", `git pushes to host api.example.com no longer limited to ref "refs/heads/agent/*"`},
			}},
		{name: "passthrough beside a restricted wildcard admits every request",
			old: pol(rule("*.example.com", methods("GET"))), new: pol(rule("*.example.com", methods("GET")), rule("pinned.example.com", passthrough)),
			want: []short{
				{Z, A, "allow", "pinned.example.com", "adds pinned.example.com, already allowed by *.example.com"},
				{W, R, "allow.methods", "pinned.example.com", "requests to host pinned.example.com no longer limited to method GET"},
			}},
		{name: "wildcard restricted, exact keeps its own rule",
			old: pol(rule("*.example.com", nil), rule("api.example.com", nil)), new: pol(rule("*.example.com", methods("GET")), rule("api.example.com", nil)),
			want: []short{{N, A, "allow.methods", "*.example.com", "requests to hosts matching *.example.com limited to method GET"}}},
		{name: "broadened to a passthrough wildcard",
			old: pol(rule("api.example.com", nil)), new: pol(rule("*.example.com", passthrough)),
			want: []short{
				{W, A, "allow", "*.example.com", "broadens api.example.com to *.example.com, passthrough: not inspected, so domain fronting is possible"},
				{W, M, "allow.passthrough", "api.example.com", "requests to host api.example.com are no longer inspected (passthrough): request rules and secrets stop applying, and domain fronting becomes possible"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := shorten(policy.Compare(tt.old, tt.new))
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Compare (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCompareRequestRulesSymmetric: swapping the sides of each request
// rule change swaps widening and narrowing.
func TestCompareRequestRulesSymmetric(t *testing.T) {
	pairs := [][2]policy.AllowRule{
		{rule("a.test", nil), rule("a.test", passthrough)},
		{rule("a.test", nil), rule("a.test", methods("GET"))},
		{rule("a.test", methods("GET")), rule("a.test", methods("GET", "POST"))},
		{rule("a.test", paths("/x")), rule("a.test", paths("/y"))},
		{rule("a.test", gitPush("refs/heads/a")), rule("a.test", nil)},
	}
	for _, p := range pairs {
		fwd := policy.Compare(policy.Sandbox{Allow: []policy.AllowRule{p[0]}}, policy.Sandbox{Allow: []policy.AllowRule{p[1]}})
		back := policy.Compare(policy.Sandbox{Allow: []policy.AllowRule{p[1]}}, policy.Sandbox{Allow: []policy.AllowRule{p[0]}})
		count := func(cs []policy.Change, d policy.Direction) int {
			n := 0
			for _, c := range cs {
				if c.Direction == d {
					n++
				}
			}
			return n
		}
		if len(fwd) == 0 || count(fwd, policy.Widen) != count(back, policy.Narrow) || count(fwd, policy.Narrow) != count(back, policy.Widen) {
			t.Errorf("%+v -> %+v: forward %v, back %v", p[0], p[1], shorten(fwd), shorten(back))
		}
	}
}

func TestCompareCAs(t *testing.T) {
	corp, test, other := testCA(t, "certs/corp.pem", "Corp Root"), testCA(t, "test.pem", "Test Root"), testCA(t, "certs/corp.pem", "Evil Root")
	fp := func(c policy.CA) string { return c.Fingerprint()[:len("sha256:")+12] + "…" }
	moved := corp
	moved.Path = "certs/root.pem"
	tests := []struct {
		name     string
		old, new []policy.CA
		want     []short
	}{
		{name: "unchanged", old: []policy.CA{corp}, new: []policy.CA{corp}},
		{name: "added", old: []policy.CA{corp}, new: []policy.CA{corp, test},
			want: []short{{policy.Widen, policy.RuleAdded, "ca", "test.pem", `the host trusts test.pem ("Test Root", ` + fp(test) + `) for upstream TLS`}}},
		{name: "removed", old: []policy.CA{corp, test}, new: []policy.CA{test},
			want: []short{{policy.Narrow, policy.RuleRemoved, "ca", "certs/corp.pem", `the host no longer trusts certs/corp.pem ("Corp Root", ` + fp(corp) + `) for upstream TLS`}}},
		{name: "content changed", old: []policy.CA{corp}, new: []policy.CA{other},
			want: []short{{policy.Widen, policy.RuleModified, "ca", "certs/corp.pem", `the host trusts certs/corp.pem ("Evil Root", ` + fp(other) + `) for upstream TLS instead of "Corp Root", ` + fp(corp)}}},
		{name: "moved", old: []policy.CA{corp}, new: []policy.CA{moved},
			want: []short{{policy.Neutral, policy.RuleAdded, "ca", "certs/root.pem", "certs/root.pem holds the certificates of certs/corp.pem, already trusted"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := shorten(policy.Compare(policy.Sandbox{CAs: tt.old}, policy.Sandbox{CAs: tt.new}))
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Compare (-want +got):\n%s", diff)
			}
		})
	}
	// A CA's origin is its ca entry.
	for _, c := range policy.Compare(policy.Sandbox{}, policy.Sandbox{CAs: []policy.CA{corp}}) {
		if c.Origin.Block != "egress.corp" || c.Origin.Line != 4 {
			t.Errorf("origin %+v, want egress.corp at line 4", c.Origin)
		}
	}
	// A PEM that is not a certificate is still named by its fingerprint.
	junk := policy.CA{Path: "x.pem", PEM: "junk"}
	cs := policy.Compare(policy.Sandbox{}, policy.Sandbox{CAs: []policy.CA{junk}})
	if len(cs) != 1 || !strings.Contains(cs[0].Detail, fp(junk)) {
		t.Errorf("Compare = %+v, want the fingerprint named", cs)
	}
}
