package match

import (
	"fmt"
	"strings"
)

// checkGlobSegment checks one segment of a path or ref pattern.
func checkGlobSegment(s string, last bool) error {
	switch {
	case s == "" && last:
		return nil
	case s == "":
		return fmt.Errorf("empty segment (\"//\")")
	case s == "." || s == "..":
		return fmt.Errorf("segment %q is not allowed; name paths as the server sees them", s)
	case s == "**":
		return nil
	case strings.Contains(s, "**"):
		return fmt.Errorf("\"**\" must be a whole segment, as in \"/v1/**\"; use \"*\" within a segment")
	}
	return nil
}

// steps, when a test sets it, counts the work the matchers do: table
// cells and glob comparisons. Tests bound it on hostile input by the
// sizes of the pattern and the path, which timing cannot do reliably on
// a loaded machine. It is nil otherwise and costs a compare.
var steps *int

func step(n int) {
	if steps != nil {
		*steps += n
	}
}

// matchSegments matches segments against pattern segments, where a "**"
// pattern segment matches any number of segments. It fills a table over
// (pattern position, segment position), so its time is bounded by their
// product whatever the pattern.
func matchSegments(pat, segs []string) bool {
	step(len(pat) * (len(segs) + 1))
	// ok[j] says whether pat[i:] matches segs[j:], computed from the end.
	ok := make([]bool, len(segs)+1)
	ok[len(segs)] = true
	next := make([]bool, len(segs)+1)
	for i := len(pat) - 1; i >= 0; i-- {
		cur := next
		if pat[i] == "**" {
			cur[len(segs)] = ok[len(segs)]
			for j := len(segs) - 1; j >= 0; j-- {
				cur[j] = ok[j] || cur[j+1]
			}
		} else {
			cur[len(segs)] = false
			for j := len(segs) - 1; j >= 0; j-- {
				cur[j] = ok[j+1] && matchGlob(pat[i], segs[j])
			}
		}
		ok, next = cur, ok
	}
	return ok[0]
}

// matchGlob matches one segment against a pattern segment in which "*"
// stands for any run of characters. It backtracks only to the last star,
// so it runs in time linear in the product of the lengths at worst.
func matchGlob(pat, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		step(1)
		switch {
		case p < len(pat) && pat[p] == '*':
			star, mark = p, i
			p++
		case p < len(pat) && pat[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pat) && pat[p] == '*' {
		p++
	}
	return p == len(pat)
}
