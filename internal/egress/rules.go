package egress

import (
	"fmt"
	"strings"

	"github.com/sbx-dev/sbx/policy"
	"github.com/sbx-dev/sbx/policy/match"
)

// requestVerdict is the decision on one request's method and path.
type requestVerdict struct {
	allowed bool
	reason  string
	rule    policy.Origin
	// pushRefs, when not nil, are the ref patterns a git-receive-pack
	// request's ref updates must match; nil means unrestricted.
	pushRefs []*match.Ref
	// scanForm, when not empty, says that the request is a POST with a
	// form body admitted only by rules that list methods, so the body
	// must be read for a _method field (formOverrideScanner); it is the
	// refusal's reason, naming the rule.
	scanForm string
}

// checkRequest decides a request to name by the allow rules matching it.
// A request passes when some matching rule admits it, and a rule admits
// it when:
//
//   - the rule lists no methods, or lists the request's method exactly:
//     methods are case-sensitive (RFC 9110), so "post" is not "POST" (a
//     server may fold it, or route it elsewhere); and, when it lists
//     methods, the request carries nothing that asks the server to read
//     it as another method (an X-HTTP-Method-Override, X-HTTP-Method or
//     X-Method-Override header, a _method query parameter; see
//     methodOverride);
//   - the rule lists no paths, or the target the upstream will receive is
//     one match.CheckRequestPath accepts (no ";", "\", dot segments,
//     encoded dots, "%25", control bytes, "//", ...) and matches one of
//     its patterns (match.Path), and the request carries no header
//     that servers route by instead (X-Original-URL, X-Rewrite-URL; see
//     pathOverride).
//
// A refusal names a rule that refused, preferring one that refused for
// the form of the request (an override, the method's case, the path's
// form) over one whose lists just do not include it, since that is what
// the user needs to know.
//
// A POST with a form body (formBody) that only rules listing methods
// admit has its body read as it streams, and is failed before it is
// whole if it carries a _method field (scanForm); such a body with a
// Content-Encoding is refused, since the scan could not see into it.
//
// For a git smart-HTTP push (receivePack), the rules that admit it say
// which refs it may update: any such rule without git_push patterns
// leaves refs unrestricted; otherwise the union of their patterns
// applies.
func (p *Policy) checkRequest(name string, q requestForm) requestVerdict {
	rules := p.rulesFor(name)
	if len(rules) == 0 {
		return requestVerdict{reason: fmt.Sprintf("%s is not in any egress allow rule", name)}
	}
	pathErr := match.CheckRequestPath(q.target)
	override := methodOverride(q.header, q.query)
	var admitted []*allowRule
	var refused *allowRule
	var why string
	formProblem := false
	for _, r := range rules {
		reason, form := r.refusal(q, name, pathErr, override)
		if reason == "" {
			admitted = append(admitted, r)
			continue
		}
		if refused == nil || form && !formProblem {
			refused, why, formProblem = r, reason, form
		}
	}
	if len(admitted) == 0 {
		return requestVerdict{reason: why, rule: refused.Origin}
	}
	v := requestVerdict{allowed: true, rule: admitted[0].Origin}
	if strings.EqualFold(q.method, "POST") && formBody(q.header) {
		v.scanForm = fmt.Sprintf("%s %s to %s is refused by %s, which %s", q.method, q.target, name, originString(admitted[0].Origin), describeRule(admitted[0]))
		for _, r := range admitted {
			if r.methods == nil {
				v.scanForm = ""
			}
		}
		// An encoded body could hide the field from the scan and not
		// from a server that decodes it.
		if ce := q.header.Get("Content-Encoding"); v.scanForm != "" && ce != "" && !strings.EqualFold(ce, "identity") {
			return requestVerdict{reason: fmt.Sprintf("%s: a %s-encoded form body cannot be checked for a _method field", v.scanForm, ce), rule: admitted[0].Origin}
		}
	}
	if q.receivePack {
		var refs []*match.Ref
		for _, r := range admitted {
			if len(r.refs) == 0 {
				return requestVerdict{allowed: true, rule: r.Origin, scanForm: v.scanForm}
			}
			refs = append(refs, r.refs...)
		}
		v.pushRefs = refs
	}
	return v
}

// refusal says why r does not admit q, or "" when it does; form reports
// that the reason is the request's form rather than r's lists.
func (r *allowRule) refusal(q requestForm, name string, pathErr error, override string) (reason string, form bool) {
	by := originString(r.Origin) + ", which " + describeRule(r)
	if r.methods != nil {
		switch {
		case !r.methods[q.method] && r.methods[strings.ToUpper(q.method)]:
			return fmt.Sprintf("%s %s to %s is refused by %s: methods are case-sensitive, and %q is not %q",
				q.method, q.target, name, by, q.method, strings.ToUpper(q.method)), true
		case !r.methods[q.method]:
			return fmt.Sprintf("%s %s to %s is not allowed by %s", q.method, q.target, name, by), false
		case override != "":
			return fmt.Sprintf("%s %s to %s is refused by %s: the request carries %s, which servers read as another method",
				q.method, q.target, name, by, override), true
		}
	}
	if len(r.paths) == 0 {
		return "", false
	}
	if pathErr != nil {
		return fmt.Sprintf("%s %q to %s is refused by %s: %v, so it could mean another path to the server",
			q.method, q.target, name, by, pathErr), true
	}
	if po := pathOverride(q.header); po != "" {
		return fmt.Sprintf("%s %s to %s is refused by %s: the request carries %s, which servers may route by instead of the path",
			q.method, q.target, name, by, po), true
	}
	for _, pp := range r.paths {
		if pp.Match(q.target) {
			return "", false
		}
	}
	return fmt.Sprintf("%s %s to %s is not allowed by %s", q.method, q.target, name, by), false
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
