package policy_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sbx-dev/sbx/policy"
)

func TestCheckMethod(t *testing.T) {
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "PROPFIND", "M-SEARCH", "TRACE"} {
		if err := policy.CheckMethod(m); err != nil {
			t.Errorf("CheckMethod(%q) = %v", m, err)
		}
	}
	for m, want := range map[string]string{
		"":                      "empty",
		"get":                   `write "GET"`,
		"Post":                  `write "POST"`,
		"CONNECT":               "CONNECT is always refused",
		"*":                     "leave methods out",
		"GET ":                  "holds ' '",
		"GE/T":                  "holds '/'",
		"GET\n":                 `holds '\n'`,
		strings.Repeat("A", 33): "longer than 32",
	} {
		err := policy.CheckMethod(m)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckMethod(%q) = %v, want an error saying %q", m, err, want)
		}
	}
}

func TestRulesForAndEffective(t *testing.T) {
	p := policy.Sandbox{Allow: []policy.AllowRule{
		rule("*.example.com", methods("GET")),
		rule("*.api.example.com", paths("/v1/**")),
		rule("pinned.api.example.com", passthrough),
		rule("*.pinned.test", passthrough),
		rule("a.pinned.test", passthrough),
		rule("*.open.test", nil),
		rule("x.open.test", methods("GET")),
	}}
	for host, want := range map[string]string{
		"example.com":            "",
		"www.example.com":        "*.example.com",
		"v1.api.example.com":     "*.example.com *.api.example.com",
		"PINNED.api.example.com": "*.example.com *.api.example.com pinned.api.example.com",
		"x.open.test":            "*.open.test x.open.test",
		"other.test":             "",
	} {
		var got []string
		for _, r := range p.RulesFor(host) {
			got = append(got, r.Pattern.String())
		}
		if strings.Join(got, " ") != want {
			t.Errorf("RulesFor(%q) = %q, want %q", host, got, want)
		}
	}
	for _, c := range []struct {
		pattern string
		want    policy.AllowRule // Pattern is set from pattern
		origin  string           // the pattern of the rule named as origin
	}{
		// A passthrough rule under an inspected one is inspected, and
		// admits every request.
		{"pinned.api.example.com", policy.AllowRule{}, "pinned.api.example.com"},
		// GET anywhere or anything under /v1: united list by list, that
		// is everything (Effective says more than passes here).
		{"*.api.example.com", policy.AllowRule{}, "*.api.example.com"},
		{"*.example.com", policy.AllowRule{Methods: []string{"GET"}}, "*.example.com"},
		{"a.pinned.test", policy.AllowRule{Passthrough: true}, "a.pinned.test"},
		{"b.pinned.test", policy.AllowRule{Passthrough: true}, "*.pinned.test"},
		// Request rules under an unrestricted rule restrict nothing.
		{"x.open.test", policy.AllowRule{}, "*.open.test"},
	} {
		q := policy.MustHostPattern(c.pattern)
		got, ok := policy.Effective(p.Allow, q)
		if !ok {
			t.Errorf("Effective(%s): no rule", c.pattern)
			continue
		}
		c.want.Pattern = q
		if diff := cmp.Diff(c.want, got, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Origin" }, cmp.Ignore())); diff != "" {
			t.Errorf("Effective(%s) (-want +got):\n%s", c.pattern, diff)
		}
		if got.Origin.Line != 0 && c.origin != "" {
			// rule() gives every rule the same origin; check instead that
			// the decision is explained by a covering rule.
			if !policy.MustHostPattern(c.origin).Covers(q) {
				t.Errorf("bad test: %s does not cover %s", c.origin, c.pattern)
			}
		}
	}
	if _, ok := policy.Effective(p.Allow, policy.MustHostPattern("example.com")); ok {
		t.Error("Effective found a rule for example.com, which only *.example.com's subdomains match")
	}
}

func TestMergeAllow(t *testing.T) {
	for _, c := range []struct {
		name      string
		a, b      policy.AllowRule
		want      policy.AllowRule
		wantExact bool
	}{
		{"equal", rule("x.test", methods("GET")), rule("x.test", methods("GET")), rule("x.test", methods("GET")), true},
		{"unrestricted wins", rule("x.test", methods("GET")), rule("x.test", nil), rule("x.test", nil), true},
		{"lists united", rule("x.test", paths("/b", "/a")), rule("x.test", paths("/c", "/a")), rule("x.test", paths("/a", "/b", "/c")), true},
		{"within", rule("x.test", both(methods("GET"), paths("/a"))), rule("x.test", methods("GET", "PUT")), rule("x.test", methods("GET", "PUT")), true},
		{"across respects", rule("x.test", both(methods("GET"), paths("/a/**"))), rule("x.test", both(methods("POST"), paths("/b/**"))),
			rule("x.test", both(methods("GET", "POST"), paths("/a/**", "/b/**"))), false},
		{"passthrough wins", rule("x.test", nil), rule("x.test", passthrough), rule("x.test", passthrough), true},
		{"passthrough drops request rules", rule("x.test", gitPush("refs/heads/a/*")), rule("x.test", passthrough), rule("x.test", passthrough), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, exact := policy.MergeAllow(c.a, c.b)
			if diff := cmp.Diff(c.want, got); diff != "" || exact != c.wantExact {
				t.Errorf("MergeAllow: exact %v, want %v; (-want +got):\n%s", exact, c.wantExact, diff)
			}
			back, exactBack := policy.MergeAllow(c.b, c.a)
			back.Origin = got.Origin
			if diff := cmp.Diff(got, back); diff != "" || exactBack != exact {
				t.Errorf("MergeAllow is not symmetric:\n%s", diff)
			}
		})
	}
}
