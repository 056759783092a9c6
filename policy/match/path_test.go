package match

import (
	"strings"
	"testing"
)

// The tests here speak of the pattern text; these compile it as the
// enforcers do.

func CheckPathPattern(p string) error {
	_, err := CompilePath(p)
	return err
}

func CheckRefPattern(p string) error {
	_, err := CompileRef(p)
	return err
}

// MatchPath compiles pattern and matches path; an invalid pattern
// matches nothing.
func MatchPath(pattern, path string) bool {
	p, err := CompilePath(pattern)
	return err == nil && p.Match(path)
}

func MatchRef(pattern, ref string) bool {
	r, err := CompileRef(pattern)
	return err == nil && r.Match(ref)
}

func TestCheckPathPattern(t *testing.T) {
	for _, p := range []string{"/", "/v1/**", "/org/repo.git/**", "/v1/models", "/v1/*/files", "/*.git/info/refs", "/v1/", "/**", "/a/**/b", "/~user/x"} {
		if err := CheckPathPattern(p); err != nil {
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
		err := CheckPathPattern(p)
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
		if err := CheckRefPattern(p); err != nil {
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
		err := CheckRefPattern(p)
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
		{"/v1/my~file", "/v1/my%7Efile", true},
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
		if got := MatchPath(c.pattern, c.path); got != c.want {
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
		if got := MatchRef(c.pattern, c.ref); got != c.want {
			t.Errorf("MatchRef(%q, %q) = %v, want %v", c.pattern, c.ref, got, c.want)
		}
	}
}

// TestMatchBounded: a pattern of many "**" and "*" against a long path
// that almost matches stays within globBound (no exponential
// backtracking).
func TestMatchBounded(t *testing.T) {
	for _, c := range []struct{ pattern, path string }{
		{strings.Repeat("/**/*a*", 20) + "/z", strings.Repeat("/aaaaaaaaaaaaaaaaaaaa", 400)},
		{"/" + strings.Repeat("*a", 50) + "z", "/" + strings.Repeat("a", 5000)},
	} {
		var got bool
		n := counted(func() { got = MatchPath(c.pattern, c.path) })
		if got {
			t.Errorf("%.20s... matched a path without the final segment", c.pattern)
		}
		k := strings.Count(c.pattern, "/")
		if bound := globBound(k, len(c.pattern), strings.Count(c.path, "/"), len(c.path)); n == 0 || n > bound {
			t.Errorf("%.20s... took %d steps; want 1 to %d", c.pattern, n, bound)
		}
	}
}

func FuzzMatchPath(f *testing.F) {
	f.Add("/v1/**", "/v1/models")
	f.Add("/a/*/b/**", "/a/%2e%2e/b")
	f.Fuzz(func(t *testing.T, pattern, path string) {
		if CheckPathPattern(pattern) != nil {
			return
		}
		got := MatchPath(pattern, path)
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

func PathPatternMatchesNothing(pattern string) string {
	p, err := CompilePath(pattern)
	if err != nil {
		return ""
	}
	return p.MatchesNothing()
}
