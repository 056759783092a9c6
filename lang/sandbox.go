package lang

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/policy"
)

var sandboxSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "image"},
		{Name: "vfs"},
		{Name: "egress"},
		{Name: "secrets"},
		{Name: "user"},
		{Name: "cpus"},
		{Name: "memory"},
		{Name: "env"},
		{Name: "forbid_env"},
	},
}

// Sandbox defaults and limits.
const (
	DefaultCPUs   = 1
	DefaultMemory = 1 << 30
	MinMemory     = 64 << 20
	MaxCPUs       = 256
	DefaultUser   = "root"
)

// blockRef is one block reference in a sandbox, with where it was written.
type blockRef struct {
	name string
	rng  hcl.Range
}

func (l *loader) decodeSandbox(b *hcl.Block) {
	content, diags := b.Body.Content(sandboxSchema)
	l.diags = append(l.diags, diags...)
	sb := &Sandbox{
		Name:      b.Labels[0],
		User:      DefaultUser,
		CPUs:      DefaultCPUs,
		Memory:    DefaultMemory,
		DeclRange: b.DefRange,
	}
	l.cfg.Sandboxes[sb.Name] = sb

	if a := content.Attributes["image"]; a == nil {
		l.errorf(b.DefRange, "Sandbox has no image", "sandbox.%s must say which image it boots, as in image = image.agent.", sb.Name)
	} else if r, ok := l.blockRef(a.Name, a.Expr, addrs.Image); ok {
		sb.Image = r.name
	}
	egress := l.blockRefs(content.Attributes["egress"], addrs.Egress)
	secrets := l.blockRefs(content.Attributes["secrets"], addrs.Secret)
	vfs := l.blockRefs(content.Attributes["vfs"], addrs.VFS)
	sb.Egress, sb.Secrets, sb.VFS = refNames(egress), refNames(secrets), refNames(vfs)

	var userRange hcl.Range
	if a := content.Attributes["user"]; a != nil {
		if s, ok := l.attrString(a); ok {
			sb.User, userRange = s, a.Expr.Range()
		}
	}
	if a := content.Attributes["cpus"]; a != nil {
		if n, ok := l.attrInt(a, -1<<31, 1<<31); ok {
			if n < 1 || n > MaxCPUs {
				l.errorf(a.Expr.Range(), "Invalid number of CPUs", "cpus must be from 1 to %d, not %d.", MaxCPUs, n)
			} else {
				sb.CPUs = int(n)
			}
		}
	}
	if a := content.Attributes["memory"]; a != nil {
		if n := l.attrSize(a, MinMemory); n > 0 {
			sb.Memory = n
		}
	}
	var envItems []item
	if a := content.Attributes["env"]; a != nil {
		sb.Env, envItems = l.attrEnv(a)
	}

	// Users: sandbox.user and every mount owner must exist in the image.
	img := l.cfg.Images[sb.Image]
	usersKnown := img != nil && !l.incomplete[addrs.Ref{Kind: addrs.Image, Name: sb.Image}]
	if usersKnown && userRange != (hcl.Range{}) && !imageHasUser(img, sb.User) {
		l.errorf(userRange, fmt.Sprintf("Unknown user %q", sb.User),
			"sandbox.%s runs as %q, but image.%s has no such user. Add a user %q block to the image, or use \"root\".", sb.Name, sb.User, img.Name, sb.User)
	}

	sb.Policy = l.sandboxPolicy(sb, egress, secrets, vfs, envItems)
	if a := content.Attributes["forbid_env"]; a != nil {
		sb.Policy.ForbidEnv, sb.Policy.ForbidEnvOrigin = l.attrForbidEnv(sb, a)
	}
	l.checkForbiddenEnv(sb, envItems, secrets)

	if usersKnown {
		for _, r := range vfs {
			v := l.cfg.VFS[r.name]
			if v == nil {
				continue
			}
			for _, m := range v.Mounts {
				if m.Owner == "" || imageHasUser(img, m.Owner) {
					continue
				}
				l.errorf(l.mountOwners[v.Name][m.Guest], fmt.Sprintf("Unknown user %q", m.Owner),
					"The mount %s of vfs.%s is owned by %q, but image.%s (the image of sandbox.%s, which uses this vfs block) has no such user. Add a user %q block to the image, or use \"root\".",
					m.Guest, v.Name, m.Owner, img.Name, sb.Name, m.Owner)
			}
		}
	}
}

func imageHasUser(img *Image, name string) bool {
	if name == "root" {
		return true
	}
	for _, u := range img.Users {
		if u.Name == name {
			return true
		}
	}
	return false
}

func refNames(refs []blockRef) []string {
	var names []string
	for _, r := range refs {
		names = append(names, r.name)
	}
	return names
}

// blockRef reads a reference to a block of the given kind, such as
// image.agent, from expr without evaluating it.
func (l *loader) blockRef(attr string, expr hcl.Expression, kind addrs.Kind) (blockRef, bool) {
	t, diags := hcl.AbsTraversalForExpr(expr)
	if diags.HasErrors() {
		hint := ""
		if lit, ok := expr.(*hclsyntax.TemplateExpr); ok && lit.IsStringLiteral() {
			if v, d := lit.Value(nil); !d.HasErrors() {
				hint = fmt.Sprintf(" Write %s.%s, without quotes.", kind, v.AsString())
			}
		}
		l.errorf(expr.Range(), fmt.Sprintf("Invalid %s reference", kind),
			"%s takes a reference to %s block, such as %s.NAME, not a value.%s", attr, article(kindNoun[kind]), kind, hint)
		return blockRef{}, false
	}
	name, ok := traversalName(t)
	if t.RootName() != string(kind) || !ok || len(t) != 2 {
		l.errorf(expr.Range(), fmt.Sprintf("Invalid %s reference", kind),
			"%s takes a reference to %s block, such as %s.NAME; %s is not one.", attr, article(kindNoun[kind]), kind, traversalString(t))
		return blockRef{}, false
	}
	r := blockRef{name: name, rng: t.SourceRange()}
	if _, declared := l.first[addrs.Ref{Kind: kind, Name: name}]; !declared {
		var declared []string
		for ref := range l.first {
			if ref.Kind == kind {
				declared = append(declared, ref.Name)
			}
		}
		l.errorf(r.rng, fmt.Sprintf("Reference to undeclared %s %q", kindNoun[kind], name),
			"%s.%s refers to %s that is not declared.%s Declare it with %s %q {} block.", kind, name, article(kindNoun[kind]),
			didYouMean(name, declared, func(s string) string { return string(kind) + "." + s }), article(string(kind)), name)
		return r, false
	}
	return r, true
}

// blockRefs reads a list of block references, such as [egress.llm].
// Only declared blocks are returned.
func (l *loader) blockRefs(a *hcl.Attribute, kind addrs.Kind) []blockRef {
	if a == nil {
		return nil
	}
	exprs, diags := hcl.ExprList(a.Expr)
	if diags.HasErrors() {
		l.errorf(a.Expr.Range(), fmt.Sprintf("Invalid %s list", kind),
			"%s takes a list of references to %s blocks, such as [%s.NAME].", a.Name, kind, kind)
		return nil
	}
	var out []blockRef
	seen := map[string]hcl.Range{}
	for _, e := range exprs {
		r, ok := l.blockRef(a.Name, e, kind)
		if !ok {
			continue
		}
		if prev, dup := seen[r.name]; dup {
			l.errorf(r.rng, "Duplicate reference", "%s.%s is already listed at %s.", kind, r.name, rangeString(prev))
			continue
		}
		seen[r.name] = r.rng
		out = append(out, r)
	}
	return out
}

// article puts "a" or "an" before noun, as it is said: "an image", "a
// user", "an npm source" (an initialism read letter by letter), "a vfs
// block".
func article(noun string) string {
	w := strings.ToLower(noun)
	switch {
	case w == "":
		return noun
	case strings.HasPrefix(w, "us") || strings.HasPrefix(w, "uni") || strings.HasPrefix(w, "url"):
		return "a " + noun
	case !strings.ContainsAny(w, "aeiouy"):
		// An initialism: "en-pee-em", "vee-ef-es".
		if strings.ContainsRune("fhlmnrsx", rune(w[0])) {
			return "an " + noun
		}
		return "a " + noun
	case strings.ContainsRune("aeiou", rune(w[0])):
		return "an " + noun
	}
	return "a " + noun
}

// sandboxPolicy forms the effective policy of a sandbox: the union of its
// egress, secret and vfs blocks in canonical order. It reports conflicts
// between the blocks and secrets whose hosts the egress does not allow.
func (l *loader) sandboxPolicy(sb *Sandbox, egress, secrets, vfs []blockRef, env []item) policy.Sandbox {
	var pol policy.Sandbox
	egressComplete := true
	mapped := map[string]policy.HostMapping{}
	for _, r := range egress {
		e := l.cfg.Egress[r.name]
		if e == nil || l.incomplete[addrs.Ref{Kind: addrs.Egress, Name: r.name}] {
			egressComplete = false
		}
		if e == nil {
			continue
		}
		pol.Allow = append(pol.Allow, e.Allow...)
		pol.CAs = append(pol.CAs, e.CAs...)
		pol.TCP = append(pol.TCP, e.TCP...)
		for _, h := range e.Hosts {
			if prev, dup := mapped[h.Name]; dup {
				if prev.Addr != h.Addr {
					l.errorf(r.rng, "Conflicting host mappings",
						"sandbox.%s maps %s to %s (%s, %s:%d) and to %s (%s, %s:%d). A name maps to one address.",
						sb.Name, h.Name, prev.Addr, prev.Origin.Block, prev.Origin.File, prev.Origin.Line, h.Addr, h.Origin.Block, h.Origin.File, h.Origin.Line)
				}
				continue
			}
			mapped[h.Name] = h
			pol.Hosts = append(pol.Hosts, h)
		}
	}
	pol.Allow = l.mergeAllow(sb, egress, pol.Allow)
	l.warnShadowed(sb, egress, pol.Allow)
	sort.SliceStable(pol.CAs, func(i, j int) bool { return pol.CAs[i].Path < pol.CAs[j].Path })
	pol.CAs = uniqueBy(pol.CAs, func(c policy.CA) string { return c.Path })
	sort.SliceStable(pol.TCP, func(i, j int) bool { return pol.TCP[i].Dest.String() < pol.TCP[j].Dest.String() })
	pol.TCP = uniqueBy(pol.TCP, func(t policy.TCPRule) string { return t.Dest.String() })
	sort.Slice(pol.Hosts, func(i, j int) bool { return pol.Hosts[i].Name < pol.Hosts[j].Name })
	if egressComplete {
		l.warnUnusedHosts(sb, egress, pol)
	}

	envOf := map[string]string{} // env name -> secret name
	for _, r := range secrets {
		s := l.cfg.Secrets[r.name]
		if s == nil {
			continue
		}
		if s.Env != "" {
			if other, dup := envOf[s.Env]; dup {
				l.errorf(r.rng, "Duplicate secret environment variable",
					"secret.%s and secret.%s both set %s in sandbox.%s; each secret needs its own variable.", other, s.Name, s.Env, sb.Name)
			}
			envOf[s.Env] = s.Name
		}
		if s.AWS != nil {
			for _, env := range []string{s.AWS.SecretKeyEnv, s.AWS.SessionTokenEnv} {
				if other, dup := envOf[env]; dup && other != s.Name {
					l.errorf(r.rng, "Duplicate secret environment variable",
						"secret.%s and secret.%s both set %s in sandbox.%s; each secret needs its own variable.", other, s.Name, env, sb.Name)
				}
				envOf[env] = s.Name
			}
		}
		hosts := append([]policy.HostPattern(nil), s.Hosts...)
		sort.Slice(hosts, func(i, j int) bool { return hosts[i].String() < hosts[j].String() })
		hosts = uniqueBy(hosts, policy.HostPattern.String)
		pol.Secrets = append(pol.Secrets, policy.SecretBinding{
			Name:      s.Name,
			Env:       s.Env,
			Hosts:     hosts,
			Headers:   s.Headers,
			PlainHTTP: s.PlainHTTP,
			Source:    s.Source,
			AWS:       s.AWS,
			OAuth:     s.OAuth,
			File:      s.File,
			Body:      s.Body,
			WebSocket: s.WebSocket,
			Origin:    l.origin("secret."+s.Name, s.DeclRange),
		})
		if !egressComplete || l.incomplete[addrs.Ref{Kind: addrs.Secret, Name: s.Name}] {
			continue
		}
		var unreachable []string
		for _, h := range hosts {
			if !allowCovers(pol.Allow, h) {
				unreachable = append(unreachable, h.String())
			}
		}
		if len(unreachable) > 0 {
			l.errorf(r.rng, "Secret host not allowed by egress",
				"secret.%s is sent to %s, but the egress of sandbox.%s (%s) does not allow %s. A secret never widens egress: add the host to an egress block's allow list, or narrow the secret's hosts.",
				s.Name, strings.Join(unreachable, ", "), sb.Name, egressList(egress), pronoun(len(unreachable)))
		}
		l.checkTokenHost(sb, s, r.rng, pol.Allow, egress)
		for _, h := range hosts {
			if g, ok := policy.Effective(pol.Allow, h); ok && g.Passthrough {
				l.errorf(r.rng, "Secret host is passthrough",
					"secret.%s is sent to %s, but the egress of sandbox.%s lets it through without inspection (passthrough, as in %s, %s:%d), so the host never sees its requests and cannot put the secret in them. Take it out of passthrough, or narrow the secret's hosts.",
					s.Name, h, sb.Name, g.Origin.Block, g.Origin.File, g.Origin.Line)
			}
		}
	}
	sort.Slice(pol.Secrets, func(i, j int) bool { return pol.Secrets[i].Name < pol.Secrets[j].Name })
	for _, it := range env {
		if s, ok := envOf[it.Key]; ok {
			l.errorf(it.KeyRange, "Environment variable set by a secret",
				"%s is the placeholder variable of secret.%s in sandbox.%s; the sandbox's env cannot set it too.", it.Key, s, sb.Name)
		}
	}

	mounted := map[string]policy.Mount{}
	for _, r := range vfs {
		v := l.cfg.VFS[r.name]
		if v == nil {
			continue
		}
		for _, m := range v.Mounts {
			if prev, dup := mounted[m.Guest]; dup {
				l.errorf(r.rng, "Conflicting mounts",
					"sandbox.%s mounts %s from both %s and %s; a guest path has one mount.", sb.Name, m.Guest, prev.Origin.Block, m.Origin.Block)
				continue
			}
			mounted[m.Guest] = m
			pol.Mounts = append(pol.Mounts, m)
		}
	}
	sort.Slice(pol.Mounts, func(i, j int) bool { return pol.Mounts[i].Guest < pol.Mounts[j].Guest })
	return pol
}

// mergeAllow sorts the allow rules of a sandbox's egress blocks by
// pattern and merges the rules for one pattern into one, the least
// restricted winning (policy.MergeAllow). Where that lets through
// requests none of the rules does alone, it warns at the sandbox's
// reference to the later block.
func (l *loader) mergeAllow(sb *Sandbox, egress []blockRef, rules []policy.AllowRule) []policy.AllowRule {
	sort.SliceStable(rules, func(i, j int) bool { return rules[i].Pattern.String() < rules[j].Pattern.String() })
	refRange := map[string]hcl.Range{}
	for _, r := range egress {
		refRange["egress."+r.name] = r.rng
	}
	var out []policy.AllowRule
	for _, r := range rules {
		if len(out) == 0 || out[len(out)-1].Pattern != r.Pattern {
			out = append(out, r)
			continue
		}
		prev := &out[len(out)-1]
		merged, exact := policy.MergeAllow(*prev, r)
		if !exact {
			why := "each of methods, paths and git_push is united on its own, so requests that neither block lets through on its own pass"
			if merged.Passthrough {
				why = "one of them lets it through without inspection, so the other's request rules do not apply"
			}
			l.warnf(refRange[r.Origin.Block], "Request rules merged more widely than written",
				"%s and %s both allow %s in sandbox.%s, and the sandbox gets the least restricted union of the two: %s. Put the rules for %s in one egress block to say exactly what passes.",
				prev.Origin.Block, r.Origin.Block, r.Pattern, sb.Name, why, r.Pattern)
		}
		// A rule that restricts nothing keeps no origin of a request
		// block that no longer narrows it.
		if !merged.Restricted() && !merged.Passthrough && prev.Restricted() {
			merged.Origin = r.Origin
		}
		if merged.Passthrough && !prev.Passthrough {
			merged.Origin = r.Origin
		}
		*prev = merged
	}
	return out
}

// warnShadowed warns about passthrough and request rules that the engine
// cannot apply because a broader pattern of the same sandbox covers theirs
// (policy.RulesFor): a passthrough host that a broader inspected rule
// matches is inspected anyway, and request rules under a broader rule
// without any let every request through anyway. Each is said once, at the
// sandbox's reference to the narrower rule's block.
func (l *loader) warnShadowed(sb *Sandbox, egress []blockRef, allow []policy.AllowRule) {
	refRange := map[string]hcl.Range{}
	for _, r := range egress {
		refRange["egress."+r.name] = r.rng
	}
	for _, r := range allow {
		if !r.Passthrough && !r.Restricted() {
			continue
		}
		for _, c := range allow {
			if c.Pattern == r.Pattern || !c.Pattern.Covers(r.Pattern) {
				continue
			}
			if r.Passthrough && !c.Passthrough {
				l.warnf(refRange[r.Origin.Block], "Passthrough has no effect",
					"In sandbox.%s, %s makes %s passthrough, but %s (%s:%d) also allows it and is inspected; a connection is spliced without inspection only when every rule matching its host says passthrough. Make %s passthrough too, or leave %s out of passthrough.",
					sb.Name, r.Origin.Block, r.Pattern, c.Pattern, c.Origin.File, c.Origin.Line, c.Pattern, r.Pattern)
				break
			}
			if !r.Passthrough && !c.Restricted() {
				l.warnf(refRange[r.Origin.Block], "Request rules have no effect",
					"In sandbox.%s, %s (%s:%d) narrows the requests to %s, but %s (%s:%d) allows every request to it; a request passes when any rule matching its host admits it. Give %s request rules too, or narrow its pattern.",
					sb.Name, r.Origin.Block, r.Origin.File, r.Origin.Line, r.Pattern, c.Pattern, c.Origin.File, c.Origin.Line, c.Pattern)
				break
			}
		}
	}
}

// warnUnusedHosts warns about each hosts mapping of pol whose name no
// allow or tcp rule of the sandbox's egress blocks reaches: it does
// nothing (policy.Sandbox.UsedHosts), so DNS does not answer the name,
// a connection to it is refused, and plan does not count the mapping.
func (l *loader) warnUnusedHosts(sb *Sandbox, egress []blockRef, pol policy.Sandbox) {
	refRange := map[string]hcl.Range{}
	for _, r := range egress {
		refRange["egress."+r.name] = r.rng
	}
	for _, h := range pol.Hosts {
		if pol.Reaches(h.Name) {
			continue
		}
		l.warnf(refRange[h.Origin.Block], "Unused host mapping",
			"In sandbox.%s, %s (%s:%d) maps %s to %s, but no allow, passthrough or tcp rule of %s lets the guest reach %s, so the mapping is unused: DNS does not answer the name and connections to it are refused. Allow the name, or remove the mapping.",
			sb.Name, h.Origin.Block, h.Origin.File, h.Origin.Line, h.Name, h.Addr, egressList(egress), h.Name)
	}
}

func allowCovers(allow []policy.AllowRule, h policy.HostPattern) bool {
	for _, a := range allow {
		if a.Pattern.Covers(h) {
			return true
		}
	}
	return false
}

func egressList(refs []blockRef) string {
	if len(refs) == 0 {
		return "no egress blocks"
	}
	var s []string
	for _, r := range refs {
		s = append(s, "egress."+r.name)
	}
	return strings.Join(s, ", ")
}

func pronoun(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// uniqueBy drops elements whose key equals the previous element's key
// from a sorted slice, keeping the first. An empty result is nil.
func uniqueBy[T any](s []T, key func(T) string) []T {
	if len(s) == 0 {
		return nil
	}
	out := s[:1]
	for _, x := range s[1:] {
		if key(x) != key(out[len(out)-1]) {
			out = append(out, x)
		}
	}
	return out
}
