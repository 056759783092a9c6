package resolve

import (
	"strconv"
	"strings"
)

// This file is the subset of npm's semver that package specs use: exact
// versions, comparators, ^ and ~ ranges, x-ranges, hyphen ranges and ||
// unions, with npm's rule that a prerelease version only satisfies a
// range naming a prerelease of the same major.minor.patch.

// semver is a parsed version. Build metadata is dropped: it does not
// take part in ordering.
type semver struct {
	major, minor, patch uint64
	pre                 []string
}

// parseSemver parses a full version, allowing a leading "v" or "=".
func parseSemver(s string) (semver, bool) {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "=")
	s = strings.TrimPrefix(strings.TrimPrefix(s, "v"), "V")
	p, ok := parsePartial(s)
	if !ok || p.n != 3 {
		return semver{}, false
	}
	return p.v, true
}

func (v semver) compare(o semver) int {
	for _, d := range [...][2]uint64{{v.major, o.major}, {v.minor, o.minor}, {v.patch, o.patch}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(v.pre) == 0 && len(o.pre) == 0:
		return 0
	case len(v.pre) == 0:
		return 1
	case len(o.pre) == 0:
		return -1
	}
	for i := 0; i < len(v.pre) && i < len(o.pre); i++ {
		if c := comparePreID(v.pre[i], o.pre[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(v.pre) < len(o.pre):
		return -1
	case len(v.pre) > len(o.pre):
		return 1
	}
	return 0
}

// comparePreID orders prerelease identifiers: numeric ones numerically
// and below alphanumeric ones, which compare as ASCII.
func comparePreID(a, b string) int {
	an, aerr := strconv.ParseUint(a, 10, 64)
	bn, berr := strconv.ParseUint(b, 10, 64)
	switch {
	case aerr == nil && berr == nil:
		switch {
		case an < bn:
			return -1
		case an > bn:
			return 1
		}
		return 0
	case aerr == nil:
		return -1
	case berr == nil:
		return 1
	}
	return strings.Compare(a, b)
}

func (v semver) sameTuple(o semver) bool {
	return v.major == o.major && v.minor == o.minor && v.patch == o.patch
}

// partial is a version with possibly missing or wildcard parts: n is the
// number of parts given (0 for "*", 1 for "1.x", 2 for "1.2", 3 for full).
type partial struct {
	v semver
	n int
}

func parsePartial(s string) (partial, bool) {
	if i := strings.IndexByte(s, '+'); i >= 0 {
		if !validIDs(s[i+1:], false) {
			return partial{}, false
		}
		s = s[:i]
	}
	var pre []string
	if i := strings.IndexByte(s, '-'); i >= 0 {
		if !validIDs(s[i+1:], true) {
			return partial{}, false
		}
		pre = strings.Split(s[i+1:], ".")
		s = s[:i]
	}
	if s == "" {
		return partial{}, len(pre) == 0
	}
	parts := strings.Split(s, ".")
	if len(parts) > 3 {
		return partial{}, false
	}
	var nums [3]uint64
	n := 0
	for i, p := range parts {
		if p == "x" || p == "X" || p == "*" {
			// Everything after a wildcard is a wildcard too.
			for _, rest := range parts[i+1:] {
				if rest != "x" && rest != "X" && rest != "*" {
					return partial{}, false
				}
			}
			break
		}
		if p == "" || (len(p) > 1 && p[0] == '0') {
			return partial{}, false
		}
		v, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return partial{}, false
		}
		nums[i] = v
		n = i + 1
	}
	if len(pre) > 0 && n < 3 {
		return partial{}, false
	}
	return partial{v: semver{major: nums[0], minor: nums[1], patch: nums[2], pre: pre}, n: n}, true
}

// validIDs checks dot-separated identifiers of [0-9A-Za-z-]; prerelease
// numeric identifiers may not have leading zeros.
func validIDs(s string, pre bool) bool {
	if s == "" {
		return false
	}
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return false
		}
		numeric := true
		for _, c := range id {
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				numeric = false
			default:
				return false
			}
		}
		if pre && numeric && len(id) > 1 && id[0] == '0' {
			return false
		}
	}
	return true
}

// comparator is one bound: op is one of "<", "<=", ">", ">=", "=".
type comparator struct {
	op string
	v  semver
}

func (c comparator) test(v semver) bool {
	d := v.compare(c.v)
	switch c.op {
	case "<":
		return d < 0
	case "<=":
		return d <= 0
	case ">":
		return d > 0
	case ">=":
		return d >= 0
	}
	return d == 0
}

// semverRange is a union of intersections of comparators.
type semverRange [][]comparator

// parseRange parses an npm range. It reports false for anything that is
// not a range (a dist-tag, for example).
func parseRange(s string) (semverRange, bool) {
	var r semverRange
	for _, alt := range strings.Split(s, "||") {
		set, ok := parseComparatorSet(strings.TrimSpace(alt))
		if !ok {
			return nil, false
		}
		r = append(r, set)
	}
	return r, true
}

func parseComparatorSet(s string) ([]comparator, bool) {
	fields := strings.Fields(s)
	if len(fields) == 3 && fields[1] == "-" {
		lo, ok1 := parsePartial(trimV(fields[0]))
		hi, ok2 := parsePartial(trimV(fields[2]))
		if !ok1 || !ok2 {
			return nil, false
		}
		var set []comparator
		if lo.n > 0 {
			set = append(set, comparator{">=", lo.v})
		}
		switch hi.n {
		case 3:
			set = append(set, comparator{"<=", hi.v})
		case 2:
			set = append(set, comparator{"<", semver{major: hi.v.major, minor: hi.v.minor + 1, pre: []string{"0"}}})
		case 1:
			set = append(set, comparator{"<", semver{major: hi.v.major + 1, pre: []string{"0"}}})
		}
		return set, true
	}
	// Join operators written apart from their version (">= 1.2.3").
	var toks []string
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if isOperator(f) && i+1 < len(fields) {
			f += fields[i+1]
			i++
		}
		toks = append(toks, f)
	}
	set := []comparator{}
	for _, t := range toks {
		cs, ok := desugar(t)
		if !ok {
			return nil, false
		}
		set = append(set, cs...)
	}
	return set, true
}

func isOperator(s string) bool {
	switch s {
	case "<", "<=", ">", ">=", "=", "^", "~", "~>":
		return true
	}
	return false
}

func trimV(s string) string {
	return strings.TrimPrefix(strings.TrimPrefix(s, "v"), "V")
}

// desugar turns one range token into plain comparators, the way
// node-semver does.
func desugar(t string) ([]comparator, bool) {
	op := ""
	for _, o := range []string{"~>", ">=", "<=", "^", "~", ">", "<", "="} {
		if strings.HasPrefix(t, o) {
			op, t = o, t[len(o):]
			break
		}
	}
	p, ok := parsePartial(trimV(strings.TrimSpace(t)))
	if !ok {
		return nil, false
	}
	v := p.v
	upper := func(major, minor, patch uint64) comparator {
		return comparator{"<", semver{major: major, minor: minor, patch: patch, pre: []string{"0"}}}
	}
	none := []comparator{{"<", semver{pre: []string{"0"}}}}
	switch op {
	case "", "=":
		switch p.n {
		case 0:
			return nil, true
		case 1:
			return []comparator{{">=", v}, upper(v.major+1, 0, 0)}, true
		case 2:
			return []comparator{{">=", v}, upper(v.major, v.minor+1, 0)}, true
		}
		return []comparator{{"=", v}}, true
	case "~", "~>":
		switch p.n {
		case 0:
			return nil, true
		case 1:
			return []comparator{{">=", v}, upper(v.major+1, 0, 0)}, true
		}
		return []comparator{{">=", v}, upper(v.major, v.minor+1, 0)}, true
	case "^":
		switch {
		case p.n == 0:
			return nil, true
		case p.n == 1:
			return []comparator{{">=", v}, upper(v.major+1, 0, 0)}, true
		case v.major > 0:
			return []comparator{{">=", v}, upper(v.major+1, 0, 0)}, true
		case p.n == 2 || v.minor > 0:
			return []comparator{{">=", v}, upper(0, v.minor+1, 0)}, true
		}
		return []comparator{{">=", v}, upper(0, 0, v.patch+1)}, true
	case ">":
		switch p.n {
		case 0:
			return none, true
		case 1:
			return []comparator{{">=", semver{major: v.major + 1}}}, true
		case 2:
			return []comparator{{">=", semver{major: v.major, minor: v.minor + 1}}}, true
		}
		return []comparator{{">", v}}, true
	case ">=":
		if p.n == 0 {
			return nil, true
		}
		return []comparator{{">=", v}}, true
	case "<":
		if p.n == 0 {
			return none, true
		}
		if p.n < 3 {
			return []comparator{{"<", semver{major: v.major, minor: v.minor, pre: []string{"0"}}}}, true
		}
		return []comparator{{"<", v}}, true
	case "<=":
		switch p.n {
		case 0:
			return nil, true
		case 1:
			return []comparator{upper(v.major+1, 0, 0)}, true
		case 2:
			return []comparator{upper(v.major, v.minor+1, 0)}, true
		}
		return []comparator{{"<=", v}}, true
	}
	return nil, false
}

// satisfies reports whether v is in the range. A prerelease version is in
// a comparator set only if the set names a prerelease of the same
// major.minor.patch.
func (r semverRange) satisfies(v semver) bool {
	for _, set := range r {
		if testSet(set, v) {
			return true
		}
	}
	return false
}

func testSet(set []comparator, v semver) bool {
	for _, c := range set {
		if !c.test(v) {
			return false
		}
	}
	if len(v.pre) == 0 {
		return true
	}
	for _, c := range set {
		if len(c.v.pre) > 0 && c.v.sameTuple(v) {
			return true
		}
	}
	return false
}
