package match

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// TestCheckRequestPath lists the request paths a path rule refuses to
// judge, each with the words its error must carry, and ordinary paths it
// must accept.
func TestCheckRequestPath(t *testing.T) {
	for _, p := range []string{
		"/", "/v1", "/v1/", "/v1/models", "/v1/my%20file", "/v1/%41", "/a.json", "/a..b", "/.well-known/x",
		"/repo.git/info/refs", "/api/v4/projects/group%2Fproject/issues", "/caf%C3%A9", "/~user", "/a:b@c",
		"/a,b=c", "/%2B", "/x/...",
	} {
		if err := CheckRequestPath(p); err != nil {
			t.Errorf("CheckRequestPath(%q) = %v, want nil", p, err)
		}
	}
	for p, want := range map[string]string{
		"":                           "not an absolute path",
		"*":                          "not a path",
		"v1/x":                       "not an absolute path",
		"https://api.test/x":         "not an absolute path",
		"//admin":                    "empty segment",
		"/v1//x":                     "empty segment",
		"/public/..;/admin":          `";"`,
		"/public;x=1/a":              `";"`,
		"/public/%3b/a":              `";"`,
		"/public/..%3B/admin":        `encoded ";"`,
		"/public/..\\admin":          `"\"`,
		"/public/..%5cadmin":         `encoded "\"`,
		"/public/..%5Cadmin":         `encoded "\"`,
		"/public/../admin":           `".." segment`,
		"/public/./admin":            `"." segment`,
		"/..":                        `".." segment`,
		"/public/%2e%2e/admin":       `encoded "."`,
		"/public/%2E%2E/admin":       `encoded "."`,
		"/public/.%2e/admin":         `encoded "."`,
		"/public/%2e./admin":         `encoded "."`,
		"/public/%2E%2e/admin":       `encoded "."`,
		"/public/%2e":                `encoded "."`,
		"/public/a%2ejson":           `encoded "."`,
		"/public/%252e%252e/admin":   `encoded "%"`,
		"/public/%25":                `encoded "%"`,
		"/public/a%00b":              "control byte 0x00",
		"/public/a%0ab":              "control byte 0x0a",
		"/public/a%0D%0Ab":           "control byte 0x0d",
		"/public/a%7f":               "control byte 0x7f",
		"/public/a\x01":              "control byte 0x01",
		"/public/%zz":                "invalid escape",
		"/public/%2":                 "invalid escape",
		"/public/%c0%ae%c0%ae/x":     "not valid UTF-8",
		"/public/%ff":                "not valid UTF-8",
		"/public/%EF%BC%8E%EF%BC%8E": "U+FF0E",
		"/public/%E2%80%A5":          "U+2025",
		"/public/%EF%BC%8Fadmin":     "U+FF0F",
		"/public/%E2%84%80":          "U+2100",
		"/public/%EF%BC%BC":          "U+FF3C",
		"/public/a%2F..%2Fadmin":     `makes a ".." segment`,
		"/public/a%2F%2Fb":           "makes an empty segment",
		"/public/%2Fadmin":           "makes an empty segment",
	} {
		err := CheckRequestPath(p)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckRequestPath(%q) = %v, want an error saying %s", p, err, want)
		}
	}
}

// TestLookalikesComplete checks the lookalike table against Unicode's
// normalisation tables: every character whose NFC or NFKC form is only
// dots or holds "/", "\", ";" or "%" is in it, and nothing else is.
func TestLookalikesComplete(t *testing.T) {
	for r := rune(0x80); r <= utf8.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		s := norm.NFKC.String(string(r))
		bad := strings.ContainsAny(s, "/\\;%") || s != "" && strings.Trim(s, ".") == ""
		if _, listed := lookalikes[r]; listed != bad {
			t.Errorf("%U (NFKC %q): listed %v, want %v", r, s, listed, bad)
		} else if listed && lookalikes[r] != s {
			t.Errorf("%U: listed as %q, NFKC gives %q", r, lookalikes[r], s)
		}
	}
}

// A serverView reads a percent-escaped path the way some server does
// before it routes, returning the segments it routes on, or ok false when
// it would refuse the path.
type serverView struct {
	name string
	read func(path string) (segs []string, ok bool)
}

// serverViews model what servers are known to do with a path: decode
// each segment (the view path patterns are written for); decode the
// whole path and then split, merge "//" and resolve dot segments (nginx,
// most frameworks); strip ";" parameters first (Tomcat, Jetty, Spring);
// read "\" as "/" (IIS, some Java servers); decode twice; apply NFKC;
// decode overlong UTF-8 forms of "." and "/".
var serverViews = []serverView{
	{"segment-decoding", func(p string) ([]string, bool) {
		var out []string
		for _, r := range strings.Split(p[1:], "/") {
			s, err := url.PathUnescape(r)
			if err != nil {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}},
	{"decode-then-normalise", func(p string) ([]string, bool) {
		s, err := url.PathUnescape(p)
		return resolveDots(s), err == nil
	}},
	{"path-parameters-stripped", func(p string) ([]string, bool) {
		raw := strings.Split(p, "/")
		for i, r := range raw {
			if j := strings.IndexByte(r, ';'); j >= 0 {
				raw[i] = r[:j]
			}
		}
		s, err := url.PathUnescape(strings.Join(raw, "/"))
		if err != nil {
			return nil, false
		}
		// Some strip parameters again after decoding.
		raw = strings.Split(s, "/")
		for i, r := range raw {
			if j := strings.IndexByte(r, ';'); j >= 0 {
				raw[i] = r[:j]
			}
		}
		return resolveDots(strings.Join(raw, "/")), true
	}},
	{"backslash-is-slash", func(p string) ([]string, bool) {
		s, err := url.PathUnescape(strings.ReplaceAll(p, "\\", "/"))
		return resolveDots(strings.ReplaceAll(s, "\\", "/")), err == nil
	}},
	{"double-decoding", func(p string) ([]string, bool) {
		s, err := url.PathUnescape(p)
		if err != nil {
			return nil, false
		}
		if t, err := url.PathUnescape(s); err == nil {
			s = t
		}
		return resolveDots(s), true
	}},
	{"nfkc", func(p string) ([]string, bool) {
		s, err := url.PathUnescape(p)
		return resolveDots(norm.NFKC.String(s)), err == nil
	}},
	{"overlong-utf8", func(p string) ([]string, bool) {
		s, err := url.PathUnescape(p)
		s = strings.NewReplacer("\xc0\xae", ".", "\xe0\x80\xae", ".", "\xc0\xaf", "/", "\xe0\x80\xaf", "/").Replace(s)
		return resolveDots(s), err == nil
	}},
}

// resolveDots splits a decoded absolute path, merging empty segments
// (but keeping a trailing one) and resolving "." and "..".
func resolveDots(p string) []string {
	if !strings.HasPrefix(p, "/") {
		return []string{"\x00not absolute"}
	}
	raw := strings.Split(p[1:], "/")
	out := []string{}
	for i, s := range raw {
		switch {
		case s == "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case s == "." || s == "" && i != len(raw)-1:
		default:
			out = append(out, s)
		}
	}
	return out
}

// checkServerViews fails when MatchPath admits a path that some server
// view routes to segments the pattern does not match.
func checkServerViews(t *testing.T, pattern, path string) {
	t.Helper()
	if CheckPathPattern(pattern) != nil || !MatchPath(pattern, path) {
		return
	}
	pat := strings.Split(pattern[1:], "/")
	for _, v := range serverViews {
		segs, ok := v.read(path)
		if ok && !matchSegments(pat, segs) {
			t.Errorf("MatchPath(%q, %q) is true, but a %s server routes %q", pattern, path, v.name, "/"+strings.Join(segs, "/"))
		}
	}
}

// pathAttacks are request paths that try to leave /public/ on some
// server, with the patterns they are tried against.
var pathAttacks = []string{
	"/public/x", "/public/", "/public", "/public/a%2Fb", "/public/a%2F..%2F..%2Fadmin",
	"/public/..;/admin", "/public/;/../admin", "/public;/../admin", "/public/%2e%2e;/admin", "/public/..%3b/admin",
	"/public/..\\admin", "/public\\..\\admin", "/public/..%5cadmin", "/public/%2e%2e/admin", "/public/.%2E/admin",
	"/public/%252e%252e/admin", "/public/%252e%252e%252fadmin", "/public/%c0%ae%c0%ae/admin", "/public/%e0%80%ae%e0%80%ae/admin",
	"/public/%EF%BC%8E%EF%BC%8E/admin", "/public/%E2%80%A5/admin", "/public/%EF%BC%8F..%EF%BC%8Fadmin",
	"/public//../admin", "//public/../admin", "/public/x/../../admin", "/public/a%00/../../admin",
	"/public/%E2%84%80", "/public/%2F", "/public/a%2f", "/public/%3B",
}

var pathAttackPatterns = []string{"/public/**", "/public/*", "/public/*/**", "/**", "/public/a", "/public/x"}

// TestMatchPathServerViews plays each attack against each pattern: a
// path MatchPath admits must match under every server view.
func TestMatchPathServerViews(t *testing.T) {
	for _, pattern := range pathAttackPatterns {
		for _, path := range pathAttacks {
			checkServerViews(t, pattern, path)
		}
	}
	// And the attacks that matter are refused outright.
	for _, path := range pathAttacks[5:] {
		if MatchPath("/public/**", path) && !strings.Contains(path, "%2F") && !strings.Contains(path, "%2f") {
			t.Errorf("MatchPath(/public/**, %q) = true", path)
		}
	}
}

// FuzzMatchPathServerViews: whatever the pattern and path, a path that
// MatchPath admits routes, under every server view, to segments the
// pattern matches.
func FuzzMatchPathServerViews(f *testing.F) {
	for _, pattern := range pathAttackPatterns {
		for _, path := range pathAttacks {
			f.Add(pattern, path)
		}
	}
	f.Fuzz(func(t *testing.T, pattern, path string) {
		checkServerViews(t, pattern, path)
	})
}

// TestPathPatternMatchesNothing: the patterns it names match no request
// path at all, and ordinary patterns are not named.
func TestPathPatternMatchesNothing(t *testing.T) {
	for _, p := range []string{"/v1/**", "/a.json", "/x/...", "/caf\u00e9"} {
		if why := PathPatternMatchesNothing(p); why != "" {
			t.Errorf("PathPatternMatchesNothing(%q) = %q", p, why)
		}
	}
	for _, p := range []string{"/a;b/**", "/x/\uff0e\uff0e", "/\u2100"} {
		if CheckPathPattern(p) != nil || PathPatternMatchesNothing(p) == "" {
			t.Errorf("%q: valid %v, named %q", p, CheckPathPattern(p), PathPatternMatchesNothing(p))
		}
		for _, path := range []string{p, (&url.URL{Path: p}).EscapedPath(), strings.ReplaceAll(p, ";", "%3B")} {
			if MatchPath(p, path) {
				t.Errorf("MatchPath(%q, %q) = true", p, path)
			}
		}
	}
}
