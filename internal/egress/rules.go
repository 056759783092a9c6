package egress

import (
	"fmt"
	"path"
	"strings"

	"github.com/sbx-dev/sbx/policy"
)

// pathPattern is a request path pattern split into segments. "*" within a
// segment matches any run of characters but '/'; a segment that is exactly
// "**" matches zero or more whole segments. Patterns are anchored at both
// ends.
type pathPattern []string

func parsePathPattern(s string) (pathPattern, error) {
	if !strings.HasPrefix(s, "/") {
		return nil, fmt.Errorf("path pattern %q must start with /", s)
	}
	segs := strings.Split(s[1:], "/")
	for _, seg := range segs {
		if strings.Contains(seg, "**") && seg != "**" {
			return nil, fmt.Errorf("path pattern %q: ** must be a whole segment", s)
		}
		if seg == "." || seg == ".." {
			return nil, fmt.Errorf("path pattern %q: . and .. segments never match", s)
		}
	}
	return pathPattern(segs), nil
}

func (p pathPattern) match(reqPath string) bool {
	if !strings.HasPrefix(reqPath, "/") {
		return false
	}
	return matchSegs(p, strings.Split(reqPath[1:], "/"), 0)
}

// matchSegs is bounded: depth grows by one per pattern segment, and each
// "**" tries at most len(segs)+1 splits.
func matchSegs(pat, segs []string, depth int) bool {
	if depth > 64 {
		return false
	}
	if len(pat) == 0 {
		return len(segs) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(segs); i++ {
			if matchSegs(pat[1:], segs[i:], depth+1) {
				return true
			}
		}
		return false
	}
	if len(segs) == 0 || !matchSegment(pat[0], segs[0]) {
		return false
	}
	return matchSegs(pat[1:], segs[1:], depth+1)
}

// matchSegment matches one segment with '*' wildcards, greedy with
// backtracking over a single star position (linear in practice).
func matchSegment(pat, s string) bool {
	px, sx := 0, 0
	star, mark := -1, 0
	for sx < len(s) {
		switch {
		case px < len(pat) && pat[px] == '*':
			star, mark = px, sx
			px++
		case px < len(pat) && pat[px] == s[sx]:
			px++
			sx++
		case star >= 0:
			px = star + 1
			mark++
			sx = mark
		default:
			return false
		}
	}
	for px < len(pat) && pat[px] == '*' {
		px++
	}
	return px == len(pat)
}

// canonicalPath reports whether a request path is in the one form path
// rules are checked against: no empty, "." or ".." segments, no encoded
// slash or backslash. Anything else could mean one path to the rule and
// another to the upstream once it normalises.
func canonicalPath(decoded, escaped string) bool {
	if !strings.HasPrefix(decoded, "/") || strings.Contains(decoded, "\\") {
		return false
	}
	low := strings.ToLower(escaped)
	if strings.Contains(low, "%2f") || strings.Contains(low, "%5c") || strings.Contains(low, "%2e") {
		return false
	}
	trimmed := decoded
	if len(trimmed) > 1 {
		trimmed = strings.TrimSuffix(trimmed, "/")
	}
	return path.Clean(trimmed) == trimmed
}

// requestVerdict is the decision on one request's method and path.
type requestVerdict struct {
	allowed bool
	reason  string
	rule    policy.Origin
	// pushRefs, when not nil, are the ref patterns a git-receive-pack
	// request's ref updates must match; nil means unrestricted.
	pushRefs []string
}

// checkRequest decides a request to name by the allow rules matching it.
// A request passes when some matching rule admits its method and path.
// For a git smart-HTTP push (receivePack), the rules that admit it say
// which refs it may update: any such rule without git_push patterns
// leaves refs unrestricted; otherwise the union of their patterns applies.
func (p *Policy) checkRequest(name, method, decodedPath, escapedPath string, receivePack bool) requestVerdict {
	rules := p.rulesFor(name)
	if len(rules) == 0 {
		return requestVerdict{reason: fmt.Sprintf("%s is not in any egress allow rule", name)}
	}
	method = strings.ToUpper(method)
	canon := canonicalPath(decodedPath, escapedPath)
	var admitted []*allowRule
	for _, r := range rules {
		if r.methods != nil && !r.methods[method] {
			continue
		}
		if len(r.paths) > 0 {
			ok := false
			for _, pp := range r.paths {
				if canon && pp.match(decodedPath) {
					ok = true
					break
				}
			}
			if !ok {
				continue
			}
		}
		admitted = append(admitted, r)
	}
	if len(admitted) == 0 {
		r := rules[0]
		why := fmt.Sprintf("%s %s to %s is not allowed", method, decodedPath, name)
		if !canon {
			why = fmt.Sprintf("%s %q to %s is not a canonical path (. or .. segments, //, encoded / or \\)", method, escapedPath, name)
		}
		return requestVerdict{reason: fmt.Sprintf("%s by %s: %s", why, originString(r.Origin), describeRule(r)), rule: r.Origin}
	}
	v := requestVerdict{allowed: true, rule: admitted[0].Origin}
	if receivePack {
		var refs []string
		for _, r := range admitted {
			if len(r.GitPush) == 0 {
				return requestVerdict{allowed: true, rule: r.Origin}
			}
			refs = append(refs, r.GitPush...)
		}
		v.pushRefs = refs
	}
	return v
}

func describeRule(r *allowRule) string {
	var parts []string
	if len(r.Methods) > 0 {
		parts = append(parts, "methods "+strings.Join(r.Methods, ", "))
	}
	if len(r.Paths) > 0 {
		parts = append(parts, "paths "+strings.Join(r.Paths, ", "))
	}
	if len(parts) == 0 {
		return "allows any request"
	}
	return "allows only " + strings.Join(parts, " and ")
}
