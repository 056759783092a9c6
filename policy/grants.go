package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// This file compares what the request rules of two policies let through
// to one host, the way the egress engine applies them: every allow rule
// whose pattern matches the host takes part (RulesFor), and a request
// passes when one of them admits both its method and its path; a git push
// that passes may update the refs of the rules that admitted it (all refs
// when one of them has no git_push). So what a host's rules let through
// is a union of grants, one per rule, each a product of its methods,
// paths and refs, and not the product of the united lists: "GET anywhere"
// beside "POST to /issues" does not let POST go anywhere.
//
// A grant is compared with the other side's grants as a whole: a request
// one grant lets through counts as let through before only when, for its
// method, a grant of the other side admits every path it may go to (the
// same list entry, a pattern covering it, or no path list at all) and, for
// a git push, refs covering its refs. That is exact when each side has one
// rule, and errs only toward reporting a change when patterns could be
// shown equal only by combining several.

// anyMethod stands for the methods no rule names.
const anyMethod = ""

// grantFinding is one way the grants of one side let through more than
// the other side's: a method none of them admits (path empty), a path
// pattern of a method (path "" for every path), or refs of a git push
// (ref "" for every ref).
type grantFinding struct {
	kind   string // "allow.methods", "allow.paths", "allow.git_push"
	method string
	path   string
	ref    string
	rule   AllowRule
}

// grantMethods lists the methods whose treatment can differ between the
// rules: every method a rule names, POST (git pushes are POSTs), and
// anyMethod for the rest.
func grantMethods(a, b []AllowRule) []string {
	set := map[string]bool{"POST": true}
	for _, r := range append(slices.Clone(a), b...) {
		for _, m := range r.Methods {
			set[m] = true
		}
	}
	out := []string{anyMethod}
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

func admitsMethod(r AllowRule, m string) bool {
	return len(r.Methods) == 0 || m != anyMethod && slices.Contains(r.Methods, m)
}

// coversPaths reports whether every path o admits is matched by pattern p
// of r ("" for r's every path).
func coversPath(o AllowRule, p string) bool {
	if len(o.Paths) == 0 {
		return true
	}
	if p == "" {
		return false
	}
	for _, q := range o.Paths {
		if q == p || globCovers(q, p) {
			return true
		}
	}
	return false
}

// coversRef reports whether the refs of the rules in rs cover ref pattern
// f ("" for every ref).
func coversRef(rs []AllowRule, f string) bool {
	for _, o := range rs {
		if len(o.GitPush) == 0 {
			return true
		}
		if f == "" {
			continue
		}
		for _, q := range o.GitPush {
			if q == f || globCovers(q, f) {
				return true
			}
		}
	}
	return false
}

// grantsBeyond returns what the rules more let through that the rules
// before do not, as findings; none when more admits nothing before does
// not.
func grantsBeyond(before, more []AllowRule, methods []string) []grantFinding {
	var out []grantFinding
	for _, n := range more {
		for _, m := range methods {
			if !admitsMethod(n, m) {
				continue
			}
			var admitting []AllowRule
			for _, o := range before {
				if admitsMethod(o, m) {
					admitting = append(admitting, o)
				}
			}
			if len(admitting) == 0 {
				out = append(out, grantFinding{kind: "allow.methods", method: m, rule: n})
				continue
			}
			paths := n.Paths
			if len(paths) == 0 {
				paths = []string{""}
			}
			for _, p := range paths {
				var cover []AllowRule
				for _, o := range admitting {
					if coversPath(o, p) {
						cover = append(cover, o)
					}
				}
				if len(cover) == 0 {
					out = append(out, grantFinding{kind: "allow.paths", method: m, path: p, rule: n})
					continue
				}
				if m != "POST" {
					continue
				}
				refs := n.GitPush
				if len(refs) == 0 {
					refs = []string{""}
				}
				for _, f := range refs {
					if !coversRef(cover, f) {
						out = append(out, grantFinding{kind: "allow.git_push", method: m, path: p, ref: f, rule: n})
					}
				}
			}
		}
	}
	return out
}

// compareGrants compares what the rules of the hosts of p let through
// before (o) and after (n) when either side has several rules for them.
// Each finding becomes a change; findings of one rule and kind are said
// in one change.
func compareGrants(p HostPattern, o, n []AllowRule) []Change {
	methods := grantMethods(o, n)
	var cs []Change
	seen := map[string]bool{}
	add := func(c Change) {
		key := string(c.Direction) + "\x00" + c.Kind + "\x00" + c.Detail
		if !seen[key] {
			seen[key] = true
			cs = append(cs, c)
		}
	}
	for _, side := range []struct {
		dir          Direction
		before, more []AllowRule
	}{{Widen, o, n}, {Narrow, n, o}} {
		type group struct {
			kind string
			rule AllowRule
		}
		var order []group
		byGroup := map[string][]grantFinding{}
		for _, f := range grantsBeyond(side.before, side.more, methods) {
			key := f.kind + "\x00" + f.rule.Pattern.String()
			if _, ok := byGroup[key]; !ok {
				order = append(order, group{f.kind, f.rule})
			}
			byGroup[key] = append(byGroup[key], f)
		}
		for _, g := range order {
			fs := byGroup[g.kind+"\x00"+g.rule.Pattern.String()]
			add(grantChange(side.dir, p, g.kind, g.rule, side.before, fs))
		}
	}
	return cs
}

// grantChange words the findings fs of one rule r and kind, which let
// through more than the rules before do (dir Widen) or, for a narrowing,
// what the rules after no longer let through (dir Narrow, before being
// the rules after the change).
func grantChange(dir Direction, p HostPattern, kind string, r AllowRule, before []AllowRule, fs []grantFinding) Change {
	hosts := describeHosts(p)
	var methodsOf, pathsOf, refsOf []string
	anyM, anyP, anyR := false, false, false
	for _, f := range fs {
		if f.method == anyMethod {
			anyM = true
		} else if !slices.Contains(methodsOf, f.method) {
			methodsOf = append(methodsOf, f.method)
		}
		if f.path == "" {
			anyP = true
		} else if !slices.Contains(pathsOf, f.path) {
			pathsOf = append(pathsOf, f.path)
		}
		if f.ref == "" {
			anyR = true
		} else if !slices.Contains(refsOf, f.ref) {
			refsOf = append(refsOf, f.ref)
		}
	}
	sort.Strings(methodsOf)
	// The other side's lists, for "no longer limited to" and "limited to".
	var otherMethods, otherPaths, otherRefs []string
	for _, o := range before {
		otherMethods = unionKeep(otherMethods, o.Methods)
		for _, f := range fs {
			if admitsMethod(o, f.method) {
				otherPaths = unionKeep(otherPaths, o.Paths)
				if kind == "allow.git_push" && coversPath(o, f.path) {
					otherRefs = unionKeep(otherRefs, o.GitPush)
				}
			}
		}
	}
	methodWord := ""
	if !anyM && len(r.Methods) > 0 {
		methodWord = strings.Join(methodsOf, ", ") + " "
	}
	onPaths := ""
	if len(r.Paths) > 0 && kind == "allow.methods" {
		onPaths = " to " + describeList(requestLists[1], r.Paths)
	}
	c := Change{Direction: dir, Kind: kind, Subject: p.String(), Origin: r.Origin}
	switch kind {
	case "allow.methods":
		switch {
		case dir == Widen && anyM:
			c.Op, c.Detail = RuleRemoved, fmt.Sprintf("requests to %s no longer limited to %s%s", hosts, describeList(requestLists[0], otherMethods), onPaths)
		case dir == Widen:
			c.Op, c.Detail = RuleAdded, fmt.Sprintf("requests to %s may also use %s%s", hosts, describeList(requestLists[0], methodsOf), onPaths)
		case anyM:
			c.Op, c.Detail = RuleAdded, fmt.Sprintf("requests to %s limited to %s", hosts, describeList(requestLists[0], otherMethods))
		default:
			c.Op, c.Detail = RuleRemoved, fmt.Sprintf("requests to %s may no longer use %s%s", hosts, describeList(requestLists[0], methodsOf), onPaths)
		}
	case "allow.paths":
		subject := methodWord + "requests to " + hosts
		switch {
		case dir == Widen && anyP:
			c.Op, c.Detail = RuleRemoved, fmt.Sprintf("%s no longer limited to %s", subject, describeList(requestLists[1], otherPaths))
		case dir == Widen:
			c.Op, c.Detail = RuleAdded, fmt.Sprintf("%s may also go to %s", subject, describeList(requestLists[1], pathsOf))
		case anyP:
			c.Op, c.Detail = RuleAdded, fmt.Sprintf("%s limited to %s", subject, describeList(requestLists[1], otherPaths))
		default:
			c.Op, c.Detail = RuleRemoved, fmt.Sprintf("%s may no longer go to %s", subject, describeList(requestLists[1], pathsOf))
		}
	default:
		subject := "git pushes to " + hosts
		if !anyP && len(r.Paths) > 0 {
			subject += " through " + describeList(requestLists[1], pathsOf)
		}
		switch {
		case dir == Widen && anyR:
			c.Op, c.Detail = RuleRemoved, fmt.Sprintf("%s no longer limited to %s", subject, describeList(requestLists[2], otherRefs))
		case dir == Widen:
			c.Op, c.Detail = RuleAdded, fmt.Sprintf("%s may also update %s", subject, describeList(requestLists[2], refsOf))
		case anyR:
			c.Op, c.Detail = RuleAdded, fmt.Sprintf("%s limited to %s", subject, describeList(requestLists[2], otherRefs))
		default:
			c.Op, c.Detail = RuleRemoved, fmt.Sprintf("%s may no longer update %s", subject, describeList(requestLists[2], refsOf))
		}
	}
	return c
}

// unionKeep adds the entries of b missing from a, keeping a's order.
func unionKeep(a, b []string) []string {
	for _, s := range b {
		if !slices.Contains(a, s) {
			a = append(a, s)
		}
	}
	return a
}

// globCovers reports whether every path (or ref) pattern p matches is
// matched by pattern q, both in the language of match.CompilePath and
// match.CompileRef. It decides by matching q against p's text, where a "*"
// or "**" of p may be matched only by a wildcard of q at least as wide;
// so it never says yes wrongly, and says no only for coverings that would
// need q's literal text to match every string p's wildcard stands for
// (none does).
func globCovers(q, p string) bool {
	if strings.HasPrefix(q, "/") != strings.HasPrefix(p, "/") {
		return false
	}
	qs := strings.Split(strings.TrimPrefix(q, "/"), "/")
	ps := strings.Split(strings.TrimPrefix(p, "/"), "/")
	// ok[j]: qs[i:] covers ps[j:], computed from the end.
	ok := make([]bool, len(ps)+1)
	ok[len(ps)] = true
	next := make([]bool, len(ps)+1)
	for i := len(qs) - 1; i >= 0; i-- {
		cur := next
		if qs[i] == "**" {
			cur[len(ps)] = ok[len(ps)]
			for j := len(ps) - 1; j >= 0; j-- {
				cur[j] = ok[j] || cur[j+1]
			}
		} else {
			cur[len(ps)] = false
			for j := len(ps) - 1; j >= 0; j-- {
				cur[j] = ok[j+1] && ps[j] != "**" && segmentCovers(qs[i], ps[j])
			}
		}
		ok, next = cur, ok
	}
	return ok[0]
}

// segmentCovers reports whether the segment glob q matches every segment
// the segment glob p does: q matched against p's text, where a "*" of p
// may be matched only by a "*" of q.
func segmentCovers(q, p string) bool {
	qi, pi := 0, 0
	star, mark := -1, 0
	for pi < len(p) {
		switch {
		case qi < len(q) && q[qi] == '*':
			star, mark = qi, pi
			qi++
		case qi < len(q) && q[qi] == p[pi] && p[pi] != '*':
			qi++
			pi++
		case star >= 0:
			qi = star + 1
			mark++
			pi = mark
		default:
			return false
		}
	}
	for qi < len(q) && q[qi] == '*' {
		qi++
	}
	return qi == len(q)
}
