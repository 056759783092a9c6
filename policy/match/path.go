package match

import (
	"fmt"
	"net/url"
	"strings"
)

// Path is a compiled request path pattern (see the package doc). It is
// immutable.
type Path struct {
	src  string
	segs []string
}

// CompilePath compiles a request path pattern. A pattern starts with
// "/" and is matched against the whole path of a request, without its
// query, one segment (the text between slashes) at a time: "*" stands for
// any run of characters within a segment, and a segment that is exactly
// "**" stands for any number of segments, none included. Characters are
// written as they are, not percent-escaped (requests are matched after
// their segments are decoded), and "." and ".." segments, empty segments
// other than a trailing one, "?", "#", "%", "\" and white space are
// refused. The error names the pattern. A pattern holding ";" compiles
// but matches no request, since CheckRequestPath refuses every path that
// holds one (MatchesNothing says so).
func CompilePath(p string) (*Path, error) {
	if p == "" {
		return nil, fmt.Errorf("empty path pattern")
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("path pattern %q must start with \"/\"", p)
	}
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		return nil, fmt.Errorf("path pattern %q holds %q; patterns match the path only, not the query or fragment", p, p[i])
	}
	if strings.Contains(p, "%") {
		return nil, fmt.Errorf("path pattern %q holds \"%%\"; write characters as they are, not percent-escaped (request paths are decoded before they are matched)", p)
	}
	for _, r := range p {
		if r < 0x21 || r == 0x7f || r == '\\' {
			return nil, fmt.Errorf("path pattern %q holds %q, which a path pattern cannot", p, r)
		}
	}
	segs := strings.Split(p[1:], "/")
	for i, s := range segs {
		if err := checkGlobSegment(s, i == len(segs)-1); err != nil {
			return nil, fmt.Errorf("path pattern %q: %v", p, err)
		}
	}
	return &Path{src: p, segs: segs}, nil
}

// String returns the pattern as written.
func (p *Path) String() string { return p.src }

// Match reports whether the request path (as sent, percent-escaped,
// without the query) matches the pattern. Each segment is decoded before
// it is compared. A path that could mean something else to the server
// than it seems to here never matches: one that CheckRequestPath refuses
// (dot segments, plain or encoded, "//", ";", "\", "%25", control bytes,
// invalid escapes and more). A path holding an encoded "/" matches only
// when it matches both as written (the "/" inside its segment) and with
// the "/" decoded into a separator, since servers differ in which they
// route.
func (p *Path) Match(path string) bool {
	if CheckRequestPath(path) != nil {
		return false
	}
	raw := strings.Split(path[1:], "/")
	segs := make([]string, len(raw))
	for i, r := range raw {
		s, err := url.PathUnescape(r)
		if err != nil {
			return false
		}
		segs[i] = s
	}
	if !matchSegments(p.segs, segs) {
		return false
	}
	if hasEncodedSlash(path) {
		return matchSegments(p.segs, strings.Split(strings.Join(segs, "/"), "/"))
	}
	return true
}

// MatchesNothing returns why the pattern can never match a request, or
// "": a pattern holding ";" or a character Unicode normalisation turns
// into a separator or dots would match only paths that CheckRequestPath
// refuses. Package lang warns with it.
func (p *Path) MatchesNothing() string {
	if strings.Contains(p.src, ";") {
		return fmt.Sprintf("path pattern %q holds \";\", and request paths holding \";\" are refused under path rules (servers such as Tomcat, Jetty and Spring strip what follows it), so it matches no request", p.src)
	}
	for _, r := range p.src {
		if to, ok := lookalikes[r]; ok {
			return fmt.Sprintf("path pattern %q holds %U, which Unicode normalisation turns into %q; request paths holding it are refused under path rules, so it matches no request", p.src, r, to)
		}
	}
	return ""
}
