package policy

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// compareRuleModes classifies what changes for the hosts of each allow
// pattern besides whether they are allowed: passthrough and the request
// rules. For every pattern on either side, the rules that apply to its
// hosts before and after are compared, the way the engine applies them
// (RulesFor: every rule whose pattern matches takes part, a request
// passes when one of them admits it, and a connection to port 443 is
// passthrough only when every one of them is); a pattern allowed on one
// side only is compareAllow's. The hosts of a wildcard pattern are
// represented by a name only it and the patterns covering it match.
//
//   - passthrough turned on widens (requests are no longer seen, so
//     request rules and secrets no longer apply and a client may front
//     another domain); turned off narrows. When the new treatment is
//     passthrough the request rules are not compared further.
//   - when one rule applies on each side, its request lists are compared
//     one by one: a list (methods, paths, git_push) that was empty and is
//     not narrows; one that empties widens; otherwise each added entry
//     widens and each removed one narrows (set comparison, as written:
//     "/v1/**" replacing "/v1/models" is one widening and one narrowing).
//   - when several apply on either side, their grants are compared as
//     wholes (compareGrants), so that removing one rule's paths widens
//     even where another rule already admits every path to other methods.
func compareRuleModes(old, new []AllowRule) []Change {
	seen := map[HostPattern]bool{}
	var pats []HostPattern
	for _, r := range append(append([]AllowRule(nil), old...), new...) {
		if !seen[r.Pattern] {
			seen[r.Pattern] = true
			pats = append(pats, r.Pattern)
		}
	}
	var cs []Change
	for _, p := range pats {
		host := classHost(p)
		o, n := rulesMatching(old, host), rulesMatching(new, host)
		if len(o) == 0 || len(n) == 0 {
			continue
		}
		cs = append(cs, compareModes(p, o, n)...)
	}
	return cs
}

// classHost is the name standing for the hosts of p: p's name, or for a
// wildcard "*.suffix", which no exact pattern is and no narrower
// wildcard matches, while every pattern covering p does.
func classHost(p HostPattern) string {
	return p.String()
}

func rulesMatching(rules []AllowRule, host string) []AllowRule {
	var out []AllowRule
	for _, r := range rules {
		if r.Pattern.Match(host) {
			out = append(out, r)
		}
	}
	return out
}

// allPassthrough reports whether a connection to port 443 of a host these
// rules match is spliced (every rule is passthrough).
func allPassthrough(rules []AllowRule) bool {
	for _, r := range rules {
		if !r.Passthrough {
			return false
		}
	}
	return len(rules) > 0
}

// describeRules summarizes what the rules of a host restrict, for the
// passthrough change that drops them.
func describeRules(rules []AllowRule) string {
	var parts []string
	for _, r := range rules {
		if r.Restricted() {
			parts = append(parts, describeRestrictions(r))
		}
	}
	return strings.Join(parts, " or ")
}

// requestList describes one request list of a rule for change details.
type requestList struct {
	kind  string
	get   func(AllowRule) []string
	limit string // "requests to %s limited to %s"
	more  string // "%s may also %s"
	less  string // "%s may no longer %s"
}

var requestLists = []requestList{
	{"allow.methods", func(r AllowRule) []string { return r.Methods }, "methods", "use", "use"},
	{"allow.paths", func(r AllowRule) []string { return r.Paths }, "paths", "go to", "go to"},
	{"allow.git_push", func(r AllowRule) []string { return r.GitPush }, "refs", "update", "update"},
}

// compareModes compares how the hosts of p were treated by the rules o
// with how the rules n treat them.
func compareModes(p HostPattern, o, n []AllowRule) []Change {
	var cs []Change
	origin := n[len(n)-1].Origin
	for _, r := range n {
		if r.Pattern == p {
			origin = r.Origin
		}
	}
	change := func(dir Direction, op Op, kind, detail string) {
		cs = append(cs, Change{Direction: dir, Op: op, Kind: kind, Subject: p.String(), Detail: detail, Origin: origin})
	}
	op, np := allPassthrough(o), allPassthrough(n)
	switch {
	case !op && np:
		detail := fmt.Sprintf("requests to %s are no longer inspected (passthrough): request rules and secrets stop applying, and domain fronting becomes possible", describeHosts(p))
		if d := describeRules(o); d != "" {
			detail += "; dropped: " + d
		}
		change(Widen, RuleModified, "allow.passthrough", detail)
		return cs
	case op && !np:
		change(Narrow, RuleModified, "allow.passthrough",
			fmt.Sprintf("requests to %s are inspected again (no longer passthrough)", describeHosts(p)))
	}
	if len(o) != 1 || len(n) != 1 {
		return append(cs, compareGrants(p, o, n)...)
	}
	for _, l := range requestLists {
		before, after := l.get(o[0]), l.get(n[0])
		switch {
		case len(before) == 0 && len(after) == 0:
		case len(before) == 0:
			change(Narrow, RuleAdded, l.kind, fmt.Sprintf("%s limited to %s", subjectOf(l, p), describeList(l, after)))
		case len(after) == 0:
			change(Widen, RuleRemoved, l.kind, fmt.Sprintf("%s no longer limited to %s", subjectOf(l, p), describeList(l, before)))
		default:
			b, a := toSet(before), toSet(after)
			var added, removed []string
			for _, s := range after {
				if !b[s] {
					added = append(added, s)
				}
			}
			for _, s := range before {
				if !a[s] {
					removed = append(removed, s)
				}
			}
			if len(added) > 0 {
				change(Widen, RuleAdded, l.kind, fmt.Sprintf("%s may also %s %s", subjectOf(l, p), l.more, describeList(l, added)))
			}
			if len(removed) > 0 {
				change(Narrow, RuleRemoved, l.kind, fmt.Sprintf("%s may no longer %s %s", subjectOf(l, p), l.less, describeList(l, removed)))
			}
		}
	}
	return cs
}

// subjectOf says whose requests a list limits: "requests to host x" or
// "git pushes to host x".
func subjectOf(l requestList, p HostPattern) string {
	if l.kind == "allow.git_push" {
		return "git pushes to " + describeHosts(p)
	}
	return "requests to " + describeHosts(p)
}

// describeList renders entries of a list: methods bare ("methods GET,
// POST"), patterns quoted ("paths "/v1/**"").
func describeList(l requestList, items []string) string {
	items = append([]string(nil), items...)
	sort.Strings(items)
	if l.kind != "allow.methods" {
		for i, s := range items {
			items[i] = strconv.Quote(s)
		}
	}
	noun := l.limit
	if len(items) == 1 {
		noun = strings.TrimSuffix(noun, "s")
	}
	return noun + " " + strings.Join(items, ", ")
}

// describeRestrictions summarizes a rule's request lists: `methods GET;
// paths "/v1/**"; git push refs "refs/heads/agent/*"`.
func describeRestrictions(r AllowRule) string {
	var parts []string
	for _, l := range requestLists {
		if items := l.get(r); len(items) > 0 {
			s := describeList(l, items)
			if l.kind == "allow.git_push" {
				s = "git push " + s
			}
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "; ")
}

// describeMode is what an added rule's detail says beyond its hosts: that
// it is passthrough, or what its request rules let through.
func describeMode(r AllowRule) string {
	switch {
	case r.Passthrough:
		return ", passthrough: not inspected, so domain fronting is possible"
	case r.Restricted():
		return " (" + describeRestrictions(r) + ")"
	}
	return ""
}

// compareCAs classifies changes to the upstream CAs. CAs are matched by
// path: a new CA widens (the host trusts more servers) and a removed one
// narrows; a file whose certificates changed widens (the host trusts
// servers it did not, whatever it stopped trusting). A CA whose
// certificates another file already brought is neutral, and removing one
// that another file still brings is not a change.
func compareCAs(old, new []CA) []Change {
	oldByPath, newByPath := map[string]CA{}, map[string]CA{}
	oldByFP, newByFP := map[string]CA{}, map[string]CA{}
	for _, c := range old {
		oldByPath[c.Path] = c
		oldByFP[c.Fingerprint()] = c
	}
	for _, c := range new {
		newByPath[c.Path] = c
		newByFP[c.Fingerprint()] = c
	}
	var cs []Change
	for path, c := range newByPath {
		o, ok := oldByPath[path]
		switch {
		case ok && o.PEM == c.PEM:
		case ok:
			cs = append(cs, Change{Direction: Widen, Op: RuleModified, Kind: "ca", Subject: path,
				Detail: fmt.Sprintf("the host trusts %s for upstream TLS instead of %s", describeCA(c), describeCAContent(o)), Origin: c.Origin})
		default:
			if same, ok := oldByFP[c.Fingerprint()]; ok {
				cs = append(cs, Change{Direction: Neutral, Op: RuleAdded, Kind: "ca", Subject: path,
					Detail: fmt.Sprintf("%s holds the certificates of %s, already trusted", path, same.Path), Origin: c.Origin})
				continue
			}
			cs = append(cs, Change{Direction: Widen, Op: RuleAdded, Kind: "ca", Subject: path,
				Detail: fmt.Sprintf("the host trusts %s for upstream TLS", describeCA(c)), Origin: c.Origin})
		}
	}
	for path, o := range oldByPath {
		if _, ok := newByPath[path]; ok {
			continue
		}
		if _, ok := newByFP[o.Fingerprint()]; ok {
			continue // still trusted, from another file
		}
		cs = append(cs, Change{Direction: Narrow, Op: RuleRemoved, Kind: "ca", Subject: path,
			Detail: fmt.Sprintf("the host no longer trusts %s for upstream TLS", describeCA(o)), Origin: o.Origin})
	}
	return cs
}

// describeCA names a CA file with what it holds: `certs/corp.pem
// (CN "Corp Root", sha256:0123456789ab…)`.
func describeCA(c CA) string {
	return c.Path + " (" + describeCAContent(c) + ")"
}

// describeCAContent names the certificates of a CA by the subject of the
// first and the fingerprint of the whole PEM.
func describeCAContent(c CA) string {
	fp := c.Fingerprint()
	short := fp[:len("sha256:")+12] + "…"
	var names []string
	rest := []byte(c.PEM)
	for len(names) < 8 {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			continue
		}
		name := cert.Subject.CommonName
		if name == "" {
			name = cert.Subject.String()
		}
		names = append(names, name)
	}
	switch len(names) {
	case 0:
		return short
	case 1:
		return fmt.Sprintf("%q, %s", names[0], short)
	}
	return fmt.Sprintf("%q and %d more, %s", names[0], len(names)-1, short)
}

// effective is Effective for a pattern the rules are known to cover.
func effective(rules []AllowRule, q HostPattern) AllowRule {
	r, _ := Effective(rules, q)
	return r
}
