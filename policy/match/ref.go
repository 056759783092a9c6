package match

import (
	"fmt"
	"slices"
	"strings"
)

// Ref is a compiled git ref pattern (see the package doc). It is
// immutable.
type Ref struct {
	src  string
	segs []string
}

// CompileRef compiles a git_push ref pattern: a full ref name under
// "refs/" ("refs/heads/agent/*") with the same "*" and "**" as path
// patterns, and otherwise only what git accepts in a ref name
// (git check-ref-format). The error names the pattern.
func CompileRef(p string) (*Ref, error) {
	if p == "" {
		return nil, fmt.Errorf("empty ref pattern")
	}
	if !strings.HasPrefix(p, "refs/") {
		full := "refs/heads/" + strings.TrimPrefix(p, "/")
		if strings.HasPrefix(p, "heads/") || strings.HasPrefix(p, "tags/") {
			full = "refs/" + p
		}
		return nil, fmt.Errorf("ref pattern %q must be a full ref name under refs/, as in %q", p, full)
	}
	for _, r := range p {
		if r < 0x21 || r == 0x7f || strings.ContainsRune("~^:?[\\", r) {
			return nil, fmt.Errorf("ref pattern %q holds %q, which git does not allow in a ref name", p, r)
		}
	}
	if strings.Contains(p, "..") || strings.Contains(p, "@{") {
		return nil, fmt.Errorf("ref pattern %q holds %q, which git does not allow in a ref name", p, firstOf(p, "..", "@{"))
	}
	segs := strings.Split(p, "/")
	for _, s := range segs {
		if err := checkGlobSegment(s, false); err != nil {
			return nil, fmt.Errorf("ref pattern %q: %v", p, err)
		}
		if strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".lock") {
			return nil, fmt.Errorf("ref pattern %q: git does not allow a ref name component %q", p, s)
		}
	}
	if strings.HasSuffix(p, ".") {
		return nil, fmt.Errorf("ref pattern %q ends with \".\", which git does not allow", p)
	}
	if len(segs) < 3 && !slices.Contains(segs, "**") {
		return nil, fmt.Errorf("ref pattern %q names no ref; write e.g. \"refs/heads/NAME\"", p)
	}
	return &Ref{src: p, segs: segs}, nil
}

// String returns the pattern as written.
func (r *Ref) String() string { return r.src }

// Match reports whether the git ref name ref ("refs/heads/agent/x")
// matches the pattern, component by component: "*" within a component
// matches any run of characters but "/", a component "**" any number of
// components (none included), anything else must be equal. So
// "refs/heads/agent/*" matches "refs/heads/agent/x" but not
// "refs/heads/agent/x/y"; "refs/heads/agent/**" matches both. Its time
// is bounded by the product of the component counts.
func (r *Ref) Match(ref string) bool {
	return matchSegments(r.segs, strings.Split(ref, "/"))
}

// AnyRef reports whether ref matches one of patterns.
func AnyRef(patterns []*Ref, ref string) bool {
	for _, p := range patterns {
		if p.Match(ref) {
			return true
		}
	}
	return false
}

func firstOf(s string, subs ...string) string {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return sub
		}
	}
	return ""
}
