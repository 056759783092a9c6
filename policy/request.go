package policy

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
)

// This file holds the request rules of an allow rule (Methods, Paths,
// GitPush): how their patterns are checked when a spec is loaded, how they
// match at run time, which rule governs a host, and how two rules for the
// same pattern merge. Package lang validates with the Check functions. The
// egress engine (internal/egress) matches with its own code; its tests
// hold plan's classification of rule changes (Compare) to that code.

// CheckMethod checks an HTTP method as written in a request rule: an HTTP
// token (RFC 9110, as RFC 7230 defined it) with no lower-case letters,
// since methods are case-sensitive and every registered method is upper
// case. CONNECT is refused: the engine never tunnels, so allowing it would
// promise what cannot happen.
func CheckMethod(m string) error {
	if m == "" {
		return fmt.Errorf("empty method")
	}
	if len(m) > 32 {
		return fmt.Errorf("method %q is longer than 32 characters", m)
	}
	for i := 0; i < len(m); i++ {
		if !isTokenChar(m[i]) {
			return fmt.Errorf("method %q holds %q, which an HTTP method cannot", m, m[i])
		}
	}
	if !strings.ContainsFunc(m, func(r rune) bool { return 'A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' }) {
		return fmt.Errorf("method %q is not a method name; to allow every method, leave methods out", m)
	}
	if up := strings.ToUpper(m); up != m {
		return fmt.Errorf("method %q is not upper case; HTTP methods are case-sensitive, write %q", m, up)
	}
	if m == "CONNECT" {
		return fmt.Errorf("CONNECT is always refused (the host never opens tunnels for the guest); list the methods of the requests themselves")
	}
	return nil
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// CheckPathPattern checks a request path pattern. A pattern starts with
// "/" and is matched against the whole path of a request, without its
// query, one segment (the text between slashes) at a time: "*" stands for
// any run of characters within a segment, and a segment that is exactly
// "**" stands for any number of segments, none included. Characters are
// written as they are, not percent-escaped (requests are matched after
// their segments are decoded), and "." and ".." segments, empty segments
// other than a trailing one, "?", "#", "\" and white space are refused.
// A pattern holding ";" is valid but matches no request, since
// CheckRequestPath refuses every path that holds one
// (PathPatternMatchesNothing says so).
func CheckPathPattern(p string) error {
	if p == "" {
		return fmt.Errorf("empty path pattern")
	}
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("path pattern %q must start with \"/\"", p)
	}
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		return fmt.Errorf("path pattern %q holds %q; patterns match the path only, not the query or fragment", p, p[i])
	}
	if strings.Contains(p, "%") {
		return fmt.Errorf("path pattern %q holds \"%%\"; write characters as they are, not percent-escaped (request paths are decoded before they are matched)", p)
	}
	for _, r := range p {
		if r < 0x21 || r == 0x7f || r == '\\' {
			return fmt.Errorf("path pattern %q holds %q, which a path pattern cannot", p, r)
		}
	}
	segs := strings.Split(p[1:], "/")
	for i, s := range segs {
		if err := checkGlobSegment(s, i == len(segs)-1); err != nil {
			return fmt.Errorf("path pattern %q: %v", p, err)
		}
	}
	return nil
}

// CheckRefPattern checks a git_push ref pattern: a full ref name under
// "refs/" ("refs/heads/agent/*") with the same "*" and "**" as path
// patterns, and otherwise only what git accepts in a ref name
// (git check-ref-format).
func CheckRefPattern(p string) error {
	if p == "" {
		return fmt.Errorf("empty ref pattern")
	}
	if !strings.HasPrefix(p, "refs/") {
		full := "refs/heads/" + strings.TrimPrefix(p, "/")
		if strings.HasPrefix(p, "heads/") || strings.HasPrefix(p, "tags/") {
			full = "refs/" + p
		}
		return fmt.Errorf("ref pattern %q must be a full ref name under refs/, as in %q", p, full)
	}
	for _, r := range p {
		if r < 0x21 || r == 0x7f || strings.ContainsRune("~^:?[\\", r) {
			return fmt.Errorf("ref pattern %q holds %q, which git does not allow in a ref name", p, r)
		}
	}
	if strings.Contains(p, "..") || strings.Contains(p, "@{") {
		return fmt.Errorf("ref pattern %q holds %q, which git does not allow in a ref name", p, firstOf(p, "..", "@{"))
	}
	segs := strings.Split(p, "/")
	for _, s := range segs {
		if err := checkGlobSegment(s, false); err != nil {
			return fmt.Errorf("ref pattern %q: %v", p, err)
		}
		if strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".lock") {
			return fmt.Errorf("ref pattern %q: git does not allow a ref name component %q", p, s)
		}
	}
	if strings.HasSuffix(p, ".") {
		return fmt.Errorf("ref pattern %q ends with \".\", which git does not allow", p)
	}
	if len(segs) < 3 && !slices.Contains(segs, "**") {
		return fmt.Errorf("ref pattern %q names no ref; write e.g. \"refs/heads/NAME\"", p)
	}
	return nil
}

func firstOf(s string, subs ...string) string {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return sub
		}
	}
	return ""
}

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

// MatchPath reports whether the request path (as sent, percent-escaped,
// without the query) matches pattern (see CheckPathPattern). Each segment
// is decoded before it is compared. A path that could mean something
// else to the server than it seems to here never matches: one that
// CheckRequestPath refuses (dot segments, plain or encoded, "//", ";",
// "\", "%25", control bytes, invalid escapes and more). A path holding an
// encoded "/" matches only when it matches both as written (the "/" inside
// its segment) and with the "/" decoded into a separator, since servers
// differ in which they route.
func MatchPath(pattern, path string) bool {
	if !strings.HasPrefix(pattern, "/") || CheckRequestPath(path) != nil {
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
	pat := strings.Split(pattern[1:], "/")
	if !matchSegments(pat, segs) {
		return false
	}
	if hasEncodedSlash(path) {
		return matchSegments(pat, strings.Split(strings.Join(segs, "/"), "/"))
	}
	return true
}

// MatchRef reports whether the git ref name ref ("refs/heads/agent/x")
// matches pattern (see CheckRefPattern).
func MatchRef(pattern, ref string) bool {
	return matchSegments(strings.Split(pattern, "/"), strings.Split(ref, "/"))
}

// matchSegments matches segments against pattern segments, where a "**"
// pattern segment matches any number of segments. It fills a table over
// (pattern position, segment position), so its time is bounded by their
// product whatever the pattern.
func matchSegments(pat, segs []string) bool {
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

// Restricted reports whether the rule narrows requests at all.
func (r AllowRule) Restricted() bool {
	return len(r.Methods) > 0 || len(r.Paths) > 0 || len(r.GitPush) > 0
}

// AllowsRequest reports whether the rule's Methods and Paths let a request
// with this method and path (percent-escaped, without the query) through.
// Methods compare exactly ("post" is not "POST"), and paths by MatchPath.
// It sees neither headers, query nor body: the egress engine also refuses,
// under a rule with Methods, requests that ask the server for another
// method (X-HTTP-Method-Override and the like, a _method parameter or
// form field), which only narrows what this admits.
// Git push refs are checked separately (AllowsPushRef), once the request
// body's ref updates have been read.
func (r AllowRule) AllowsRequest(method, path string) bool {
	if len(r.Methods) > 0 && !slices.Contains(r.Methods, method) {
		return false
	}
	if len(r.Paths) == 0 {
		return true
	}
	for _, p := range r.Paths {
		if MatchPath(p, path) {
			return true
		}
	}
	return false
}

// AllowsPushRef reports whether a git push may update ref under the rule.
func (r AllowRule) AllowsPushRef(ref string) bool {
	if len(r.GitPush) == 0 {
		return true
	}
	for _, p := range r.GitPush {
		if MatchRef(p, ref) {
			return true
		}
	}
	return false
}

// RulesFor returns the allow rules whose patterns match host. This is how
// the egress engine applies a policy: a request to host passes when any of
// them admits it (a rule without request lists admits every request), and
// an HTTPS connection to host is spliced without inspection only when
// every one of them is passthrough. So a narrower pattern cannot restrict
// what a broader unrestricted one allows, nor make its hosts passthrough
// beside a broader inspected one.
func (p Sandbox) RulesFor(host string) []AllowRule {
	var out []AllowRule
	for _, r := range p.Allow {
		if r.Pattern.Match(host) {
			out = append(out, r)
		}
	}
	return out
}

// Effective returns one rule describing how rules treat the hosts of q,
// by the rules whose patterns cover q (see RulesFor): passthrough when
// every one of them is; unrestricted when one of them has no request
// lists; otherwise their lists united one by one (which, when they
// restrict in different respects, describes more than passes, so Compare
// does not classify by it: it compares each rule's grant). Its
// origin is the rule for q itself if there is one, else the most specific
// covering rule that decides. ok is false when no rule covers q. Rules
// more specific than q may treat some of its hosts differently.
func Effective(rules []AllowRule, q HostPattern) (eff AllowRule, ok bool) {
	var cover []AllowRule
	for _, r := range rules {
		if r.Pattern.Covers(q) {
			cover = append(cover, r)
		}
	}
	if len(cover) == 0 {
		return AllowRule{}, false
	}
	// Most specific first, so that the origin is the closest rule.
	sort.SliceStable(cover, func(i, j int) bool {
		a, b := cover[i].Pattern, cover[j].Pattern
		if (a == q) != (b == q) {
			return a == q
		}
		return len(a.Suffix) > len(b.Suffix)
	})
	eff = AllowRule{Pattern: q, Passthrough: true, Origin: cover[0].Origin}
	for _, r := range cover {
		eff.Passthrough = eff.Passthrough && r.Passthrough
	}
	if eff.Passthrough {
		return eff, true
	}
	for _, r := range cover {
		if !r.Restricted() {
			return AllowRule{Pattern: q, Origin: r.Origin}, true
		}
	}
	eff.Methods, eff.Paths, eff.GitPush = cover[0].Methods, cover[0].Paths, cover[0].GitPush
	for _, r := range cover[1:] {
		eff.Methods = unionLists(eff.Methods, r.Methods)
		eff.Paths = unionLists(eff.Paths, r.Paths)
		eff.GitPush = unionLists(eff.GitPush, r.GitPush)
	}
	return eff, true
}

// MergeAllow merges two rules for the same pattern, as when two egress
// blocks of one sandbox allow it: the least restricted wins. The result
// is passthrough if either is; a list either rule leaves empty
// (unrestricted) stays empty; two lists are united. A passthrough result
// carries no request rules, since its requests are never seen. The origin
// is a's.
//
// exact reports whether the result allows just what a or b allows. It does
// not when the rules restrict differently in more than one respect: a
// rule allowing GET to /a/** merged with one allowing POST to /b/** allows
// GET to /b/** too, since each list is united on its own.
func MergeAllow(a, b AllowRule) (merged AllowRule, exact bool) {
	m := AllowRule{Pattern: a.Pattern, Origin: a.Origin, Passthrough: a.Passthrough || b.Passthrough}
	if m.Passthrough {
		dropped := (!a.Passthrough && a.Restricted()) || (!b.Passthrough && b.Restricted())
		return m, !dropped
	}
	m.Methods = unionLists(a.Methods, b.Methods)
	m.Paths = unionLists(a.Paths, b.Paths)
	m.GitPush = unionLists(a.GitPush, b.GitPush)
	lists := [][2][]string{{a.Methods, b.Methods}, {a.Paths, b.Paths}, {a.GitPush, b.GitPush}}
	aInB, bInA, differ := true, true, 0
	for _, l := range lists {
		ab, ba := subsetOrAll(l[0], l[1]), subsetOrAll(l[1], l[0])
		aInB, bInA = aInB && ab, bInA && ba
		if !ab || !ba {
			differ++
		}
	}
	return m, aInB || bInA || differ <= 1
}

// subsetOrAll reports whether what list x allows is within what y allows,
// an empty list allowing everything.
func subsetOrAll(x, y []string) bool {
	if len(y) == 0 {
		return true
	}
	if len(x) == 0 {
		return false
	}
	for _, s := range x {
		if !slices.Contains(y, s) {
			return false
		}
	}
	return true
}

// unionLists unites two rule lists, where an empty list means no
// restriction: the result is sorted, without repeats, and nil when either
// is empty.
func unionLists(a, b []string) []string {
	if len(a) == 0 || len(b) == 0 {
		return nil
	}
	out := append(append([]string(nil), a...), b...)
	sort.Strings(out)
	return slices.Compact(out)
}
