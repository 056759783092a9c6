package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// This file holds the request rules of an allow rule (Methods, Paths,
// GitPush): how a method is checked when a spec is loaded, which rule
// governs a host, and how two rules for the same pattern merge. Path and
// ref patterns are package policy/match's: lang validates them and the
// egress engine (internal/egress) matches with it; the engine's tests
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

// Restricted reports whether the rule narrows requests at all.
func (r AllowRule) Restricted() bool {
	return len(r.Methods) > 0 || len(r.Paths) > 0 || len(r.GitPush) > 0
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
