package policy_test

import (
	"strings"
	"testing"
	"time"

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

func TestCheckPathPattern(t *testing.T) {
	for _, p := range []string{"/", "/v1/**", "/org/repo.git/**", "/v1/models", "/v1/*/files", "/*.git/info/refs", "/v1/", "/**", "/a/**/b", "/~user/x"} {
		if err := policy.CheckPathPattern(p); err != nil {
			t.Errorf("CheckPathPattern(%q) = %v", p, err)
		}
	}
	for p, want := range map[string]string{
		"":          "empty",
		"v1/**":     `must start with "/"`,
		"/a?b":      "not the query",
		"/a#b":      "not the query",
		"/a%2Fb":    "percent-escaped",
		"/a b":      "holds ' '",
		"/a\\b":     `holds '\\'`,
		"/a/../b":   `segment ".."`,
		"/./a":      `segment "."`,
		"/a//b":     "empty segment",
		"/a/**b":    "whole segment",
		"/a/***":    "whole segment",
		"/a\x00":    "holds",
		"/\u00a0ok": "",
	} {
		err := policy.CheckPathPattern(p)
		if want == "" {
			if err != nil {
				t.Errorf("CheckPathPattern(%q) = %v, want nil", p, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckPathPattern(%q) = %v, want an error saying %q", p, err, want)
		}
	}
}

func TestCheckRefPattern(t *testing.T) {
	for _, p := range []string{"refs/heads/agent/*", "refs/heads/main", "refs/tags/**", "refs/heads/agent-*", "refs/**", "refs/heads/*/wip"} {
		if err := policy.CheckRefPattern(p); err != nil {
			t.Errorf("CheckRefPattern(%q) = %v", p, err)
		}
	}
	for p, want := range map[string]string{
		"":                    "empty",
		"agent/*":             `as in "refs/heads/agent/*"`,
		"heads/main":          `as in "refs/heads/main"`,
		"refs/heads/a..b":     `".."`,
		"refs/heads/a@{1}":    `"@{"`,
		"refs/heads/x.lock":   `component "x.lock"`,
		"refs/heads/.hidden":  `component ".hidden"`,
		"refs/heads/a~1":      "'~'",
		"refs/heads/a^":       "'^'",
		"refs/heads/a:b":      "':'",
		"refs/heads/a?":       "'?'",
		"refs/heads/[ab]":     "'['",
		"refs/heads/a b":      "' '",
		"refs/heads//a":       "empty segment",
		"refs/heads/a/":       "empty segment",
		"refs/heads/a.":       `ends with "."`,
		"refs/heads/**x":      "whole segment",
		"refs/heads":          "names no ref",
		"refs/heads/a\\b":     `'\\'`,
		"refs/heads/\x7fdel":  "git does not allow",
		"refs/heads/agent/..": `".."`,
	} {
		err := policy.CheckRefPattern(p)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckRefPattern(%q) = %v, want an error saying %q", p, err, want)
		}
	}
}

// TestMatchPath covers the pattern language and, adversarially, request
// paths that could mean something else to the server than they seem to:
// dot segments (plain and escaped), escaped slashes and backslashes, NUL,
// doubled slashes and invalid escapes never match, however broad the
// pattern.
func TestMatchPath(t *testing.T) {
	for _, c := range []struct {
		pattern, path string
		want          bool
	}{
		{"/v1/**", "/v1/models", true},
		{"/v1/**", "/v1/a/b/c", true},
		{"/v1/**", "/v1", true},
		{"/v1/**", "/v1/", true},
		{"/v1/**", "/v2/models", false},
		{"/v1/**", "/v10/models", false},
		{"/v1/**", "/", false},
		{"/v1/*", "/v1/models", true},
		{"/v1/*", "/v1/models/x", false},
		{"/v1/*", "/v1/", true},
		{"/v1/*/files", "/v1/abc/files", true},
		{"/v1/*/files", "/v1/a/b/files", false},
		{"/*.git/info/refs", "/repo.git/info/refs", true},
		{"/*.git/info/refs", "/repo/info/refs", false},
		{"/a/**/b", "/a/b", true},
		{"/a/**/b", "/a/x/y/b", true},
		{"/a/**/b", "/a/x/y/c", false},
		{"/**", "/anything/at/all", true},
		{"/", "/", true},
		{"/", "/x", false},
		{"/v1/models", "/v1/models", true},
		{"/v1/models", "/V1/models", false},
		{"/v1/models", "/v1/models/", false},
		{"/v1/my file", "/v1/my%20file", true},
		{"/v1/*", "/v1/%41", true},
		{"/v1/A", "/v1/%41", true},
		{"/v1/**", "v1/models", false},
		{"/org/repo.git/**", "/org/repo.git/git-receive-pack", true},
		// Paths that could escape the pattern on the server.
		{"/v1/**", "/v1/../admin", false},
		{"/v1/**", "/v1/%2e%2e/admin", false},
		{"/v1/**", "/v1/%2E%2E/admin", false},
		{"/v1/**", "/v1/./x", false},
		{"/v1/**", "/v1/.%2e/admin", false},
		{"/v1/*", "/v1/a%2Fb", false},
		// An encoded "/" passes only where it matches decoded or not.
		{"/v1/**", "/v1/a%2fb", true},
		{"/v1/**", "/v1/a%2f..%2fb", false},
		{"/v1/*/x", "/v1/a%2Fb/x", false},
		{"/v1/**/x", "/v1/a%2Fb/x", true},
		{"/v1/**", "/v1/..;/admin", false},
		{"/v1/**", "/v1/%252e%252e/admin", false},
		{"/v1/**", "/v1/a%3bb", false},
		{"/v1/**", "/v1/a%5Cb", false},
		{"/v1/**", "/v1/a%00b", false},
		{"/v1/**", "/v1//x", false},
		{"/v1/**", "/v1/%zz", false},
		{"/**", "/../etc/passwd", false},
	} {
		if got := policy.MatchPath(c.pattern, c.path); got != c.want {
			t.Errorf("MatchPath(%q, %q) = %v, want %v", c.pattern, c.path, got, c.want)
		}
	}
}

func TestMatchRef(t *testing.T) {
	for _, c := range []struct {
		pattern, ref string
		want         bool
	}{
		{"refs/heads/agent/*", "refs/heads/agent/x", true},
		{"refs/heads/agent/*", "refs/heads/agent/x/y", false},
		{"refs/heads/agent/*", "refs/heads/main", false},
		{"refs/heads/agent/*", "refs/heads/agent", false},
		{"refs/heads/agent/**", "refs/heads/agent/x/y", true},
		{"refs/heads/agent-*", "refs/heads/agent-1", true},
		{"refs/heads/agent-*", "refs/heads/agent/1", false},
		{"refs/heads/main", "refs/heads/main", true},
		{"refs/heads/main", "refs/heads/mainx", false},
		{"refs/heads/main", "refs/tags/main", false},
		{"refs/**", "refs/tags/v1", true},
	} {
		if got := policy.MatchRef(c.pattern, c.ref); got != c.want {
			t.Errorf("MatchRef(%q, %q) = %v, want %v", c.pattern, c.ref, got, c.want)
		}
	}
}

// TestMatchBounded: a pattern of many "**" and "*" against a long path
// that almost matches finishes at once (no exponential backtracking).
func TestMatchBounded(t *testing.T) {
	pattern := strings.Repeat("/**/*a*", 20) + "/z"
	path := strings.Repeat("/aaaaaaaaaaaaaaaaaaaa", 400)
	seg := "/" + strings.Repeat("*a", 50) + "z"
	start := time.Now()
	if policy.MatchPath(pattern, path) || policy.MatchPath(seg, "/"+strings.Repeat("a", 5000)) {
		t.Error("matched a path without the final segment")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("matching took %v", d)
	}
}

func TestAllowsRequest(t *testing.T) {
	r := policy.AllowRule{Methods: []string{"GET", "POST"}, Paths: []string{"/org/repo.git/**"}, GitPush: []string{"refs/heads/agent/*"}}
	for _, c := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/org/repo.git/info/refs", true},
		{"POST", "/org/repo.git/git-receive-pack", true},
		{"PUT", "/org/repo.git/info/refs", false},
		{"get", "/org/repo.git/info/refs", false},
		{"GET", "/org/other.git/info/refs", false},
		{"GET", "/org/repo.git/../other.git/info/refs", false},
	} {
		if got := r.AllowsRequest(c.method, c.path); got != c.want {
			t.Errorf("AllowsRequest(%s %s) = %v, want %v", c.method, c.path, got, c.want)
		}
	}
	if !r.AllowsPushRef("refs/heads/agent/x") || r.AllowsPushRef("refs/heads/main") {
		t.Error("AllowsPushRef does not follow GitPush")
	}
	var open policy.AllowRule
	if !open.AllowsRequest("DELETE", "/anything") || !open.AllowsPushRef("refs/heads/main") || open.Restricted() {
		t.Error("a rule without request lists restricts something")
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

func FuzzMatchPath(f *testing.F) {
	f.Add("/v1/**", "/v1/models")
	f.Add("/a/*/b/**", "/a/%2e%2e/b")
	f.Fuzz(func(t *testing.T, pattern, path string) {
		if policy.CheckPathPattern(pattern) != nil {
			return
		}
		got := policy.MatchPath(pattern, path)
		// A path that matches never holds a dot segment, once decoded.
		if got {
			for _, s := range strings.Split(path, "/") {
				if s == ".." || s == "." || strings.EqualFold(s, "%2e%2e") {
					t.Errorf("MatchPath(%q, %q) matched a dot segment", pattern, path)
				}
			}
		}
	})
}
