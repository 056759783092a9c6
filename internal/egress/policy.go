package egress

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/netip"
	"net/url"
	"sort"
	"strings"

	"github.com/sbx-dev/sbx/internal/egress/oauth"
	"github.com/sbx-dev/sbx/policy"
	"github.com/sbx-dev/sbx/policy/match"
)

// Policy is one sandbox's egress policy compiled for the proxy: the
// policy.Sandbox it came from, the secrets' real values and placeholders,
// and the upstream trust pool. It is immutable; Engine.Update swaps it.
type Policy struct {
	src     policy.Sandbox
	allow   []allowRule
	tcp     map[policy.HostPort]policy.TCPRule
	hosts   map[string]netip.AddrPort
	secrets []*secret
	// aws are the AWS credentials among secrets (aws.go).
	aws []*awsCred
	// logins are the OAuth secrets, brokered by package oauth.
	logins []*loginSecret
	// roots verifies upstream servers: the system roots plus the spec's CAs.
	roots *x509.CertPool
	// mask replaces every real value, in any ASCII case and in the
	// encodings maskForms lists, by its placeholder in what flows back to
	// the guest; nil when the policy has no secrets. maskPairs are its
	// (old, new) pairs.
	mask      *replacer
	maskPairs [][2]string
}

type allowRule struct {
	policy.AllowRule
	methods map[string]bool
	// paths and refs are the rule's Paths and GitPush compiled.
	paths []*match.Path
	refs  []*match.Ref
}

type secret struct {
	policy.SecretBinding
	value       []byte
	placeholder string
	// aws, when set, makes this one part of an AWS credential (its key
	// id, secret key or session token), which goes only into the
	// signature the host computes (aws.go), never into a header as is.
	aws *awsCred
	// bodyOnly marks a copy of a secret with body fields that bodyScanner
	// looks for in a request its fields do not name (bodyOnlyFor).
	bodyOnly bool
}

// minSecretLen is the shortest value Compile accepts: every occurrence of
// a value in a response is masked, and a very short value would match by
// chance in ordinary content and garble it.
const minSecretLen = 8

// Compile checks p and the secrets' values and makes the Policy the
// engine enforces. secrets maps each secret's name to its real value and
// placeholders each name to the placeholder the guest sees; every secret
// p binds must be in both. Errors name secrets, never values.
func Compile(p policy.Sandbox, secrets map[string][]byte, placeholders map[string]string) (*Policy, error) {
	return CompileLogins(p, secrets, placeholders, nil)
}

// CompileLogins is Compile for a policy that binds OAuth secrets (those
// with an oauth block): logins maps each of them to its login, opened on
// the host's credential file (package oauth), and they need no value or
// placeholder in the other maps. See logins.go for how they are brokered.
func CompileLogins(p policy.Sandbox, secrets map[string][]byte, placeholders map[string]string, logins map[string]*oauth.Login) (*Policy, error) {
	c := &Policy{
		src:   p,
		tcp:   make(map[policy.HostPort]policy.TCPRule),
		hosts: make(map[string]netip.AddrPort),
	}
	var errs []error
	for _, r := range p.Allow {
		ar := allowRule{AllowRule: r}
		if len(r.Methods) > 0 {
			ar.methods = make(map[string]bool)
			for _, m := range r.Methods {
				ar.methods[strings.ToUpper(m)] = true
			}
		}
		for _, s := range r.Paths {
			pp, err := match.CompilePath(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %v", originString(r.Origin), err))
				continue
			}
			ar.paths = append(ar.paths, pp)
		}
		for _, g := range r.GitPush {
			rp, err := match.CompileRef(g)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %v", originString(r.Origin), err))
				continue
			}
			ar.refs = append(ar.refs, rp)
		}
		c.allow = append(c.allow, ar)
	}
	for _, r := range p.TCP {
		c.tcp[policy.HostPort{Host: canonicalName(r.Dest.Host), Port: r.Dest.Port}] = r
	}
	for _, h := range p.Hosts {
		ap, err := netip.ParseAddrPort(h.Addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: hosts mapping %q: %v", originString(h.Origin), h.Name, err))
			continue
		}
		c.hosts[canonicalName(h.Name)] = ap
	}

	seen := make(map[string]string)
	for _, b := range p.Secrets {
		if b.OAuth != nil {
			if err := c.addLogin(b, logins[b.Name]); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		v, ok := secrets[b.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("secret %q: no value was resolved", b.Name))
			continue
		}
		ph, ok := placeholders[b.Name]
		if !ok || ph == "" {
			errs = append(errs, fmt.Errorf("secret %q: no placeholder", b.Name))
			continue
		}
		if b.AWS != nil {
			parts, err := compileAWS(b, v, ph)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			c.secrets = append(c.secrets, parts...)
			c.aws = append(c.aws, parts[0].aws)
			continue
		}
		switch {
		case len(v) < minSecretLen:
			errs = append(errs, fmt.Errorf("secret %q: its value is %d bytes; values shorter than %d bytes cannot be masked reliably", b.Name, len(v), minSecretLen))
			continue
		case strings.ContainsAny(string(v), "\r\n\x00"):
			errs = append(errs, fmt.Errorf("secret %q: its value contains a line break or NUL, which cannot go into an HTTP header", b.Name))
			continue
		case strings.Contains(string(v), ph) || strings.Contains(ph, string(v)):
			errs = append(errs, fmt.Errorf("secret %q: its value and placeholder overlap", b.Name))
			continue
		}
		if other, dup := seen[ph]; dup {
			errs = append(errs, fmt.Errorf("secrets %q and %q share a placeholder", other, b.Name))
			continue
		}
		seen[ph] = b.Name
		c.secrets = append(c.secrets, &secret{SecretBinding: b, value: append([]byte(nil), v...), placeholder: ph})
	}
	// Longer values first, so that a value containing another is masked whole.
	sort.SliceStable(c.secrets, func(i, j int) bool { return len(c.secrets[i].value) > len(c.secrets[j].value) })
	if len(c.secrets) > 0 {
		var pairs, values [][2]string
		for _, s := range c.secrets {
			pairs = append(pairs, maskForms(string(s.value), s.placeholder)...)
			values = append(values, [2]string{string(s.value), s.placeholder})
		}
		// Longer olds first, so that at one place the longest form wins.
		sort.SliceStable(pairs, func(i, j int) bool { return len(pairs[i][0]) > len(pairs[j][0]) })
		c.maskPairs = pairs
		c.mask = newMasker(pairs, values)
	}

	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	for _, ca := range p.CAs {
		if !roots.AppendCertsFromPEM([]byte(ca.PEM)) {
			errs = append(errs, fmt.Errorf("%s: CA file %s holds no PEM certificate", originString(ca.Origin), ca.Path))
		}
	}
	c.roots = roots
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// Source returns the policy.Sandbox the Policy was compiled from.
func (p *Policy) Source() policy.Sandbox { return p.src }

// Placeholders returns each secret's placeholder by the guest environment
// variable that carries it.
func (p *Policy) Placeholders() map[string]string {
	m := make(map[string]string, len(p.secrets))
	for _, s := range p.secrets {
		m[s.Env] = s.placeholder
	}
	return m
}

// Resolves reports whether DNS should answer for name: an allowed HTTP(S)
// host or the host of a tcp rule. A hosts mapping alone does not make a
// name resolve: it only says where an allowed name is dialled, and one
// of a name nothing allows is unused (policy.Sandbox.UsedHosts).
func (p *Policy) Resolves(name string) bool {
	name = canonicalName(name)
	if name == "" {
		return false
	}
	for hp := range p.tcp {
		if hp.Host == name {
			return true
		}
	}
	return len(p.rulesFor(name)) > 0
}

// Accepts reports whether a TCP connection to name:port is allowed: ports
// 80 and 443 of a host an allow rule matches, or the exact name and port
// of a tcp rule. A hosts mapping alone allows nothing; it only says where
// an allowed name is dialled.
func (p *Policy) Accepts(name string, port uint16) bool {
	return p.flowKind(canonicalName(name), port) != kindDeny
}

type flowKind int

const (
	kindDeny        flowKind = iota
	kindHTTP                 // terminated and inspected (TLS or plain)
	kindPassthrough          // TLS spliced after its SNI is checked
	kindTCP                  // raw TCP spliced
)

func (k flowKind) String() string {
	return [...]string{"deny", "http", "tls-passthrough", "tcp"}[k]
}

// flowKind decides how a connection is handled. An exact tcp rule wins:
// it is the spec's statement about that very port. Otherwise ports 80 and
// 443 of an allowed host are inspected, unless every allow rule matching
// the name opts out with passthrough (then port 443 is spliced): inspection
// is the default, and a secret or request rule on any matching rule needs it.
func (p *Policy) flowKind(name string, port uint16) flowKind {
	if name == "" {
		return kindDeny
	}
	if _, ok := p.tcp[policy.HostPort{Host: name, Port: port}]; ok {
		return kindTCP
	}
	if port != 80 && port != 443 {
		return kindDeny
	}
	rules := p.rulesFor(name)
	if len(rules) == 0 {
		return kindDeny
	}
	if port == 443 {
		pass := true
		for _, r := range rules {
			pass = pass && r.Passthrough
		}
		if pass {
			return kindPassthrough
		}
	}
	return kindHTTP
}

func (p *Policy) rulesFor(name string) []*allowRule {
	var out []*allowRule
	for i := range p.allow {
		if p.allow[i].Pattern.Match(name) {
			out = append(out, &p.allow[i])
		}
	}
	return out
}

// ruleFor returns the origin of the rule that lets name:port through, for
// audit entries of whole flows.
func (p *Policy) ruleFor(name string, port uint16) policy.Origin {
	if r, ok := p.tcp[policy.HostPort{Host: name, Port: port}]; ok {
		return r.Origin
	}
	if rules := p.rulesFor(name); len(rules) > 0 {
		return rules[0].Origin
	}
	return policy.Origin{}
}

// canonicalName lower-cases name and drops a trailing dot.
func canonicalName(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// originString renders a rule's origin the way a user finds it:
// "egress.llm (main.hcl:12)".
func originString(o policy.Origin) string {
	switch {
	case o.Block == "" && o.File == "":
		return "the policy"
	case o.File == "":
		return o.Block
	case o.Line > 0:
		return fmt.Sprintf("%s (%s:%d)", o.Block, o.File, o.Line)
	default:
		return fmt.Sprintf("%s (%s)", o.Block, o.File)
	}
}

// maskForms lists the forms of a value that masking replaces, each with
// the same form of the placeholder: the value itself (matched in any
// ASCII case), its base64 in the standard and URL alphabets (whole, with
// and without padding, and the characters that only the value decides
// wherever it starts in a longer base64 text), its percent-encodings
// for a query and a path, its HTML escapes, and its JSON string escapes
// (with "<>&" as \u escapes and "/" as "\/"). Forms that equal one
// already listed, in any case, are listed once. What the forms cannot
// cover is stated in docs/security.md: any other transformation of the
// value (reversed, split, re-encoded otherwise) passes.
func maskForms(value, ph string) [][2]string {
	var out [][2]string
	seen := map[string]bool{}
	add := func(old, new string) {
		if len(old) < minSecretLen || seen[strings.ToLower(old)] {
			return
		}
		seen[strings.ToLower(old)] = true
		out = append(out, [2]string{old, new})
	}
	add(value, ph)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		add(enc.EncodeToString([]byte(value)), enc.EncodeToString([]byte(ph)))
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for k := 0; k < 3; k++ {
			add(base64Core(enc, value, k), base64Core(enc, ph, k))
		}
	}
	add(url.QueryEscape(value), url.QueryEscape(ph))
	add(url.PathEscape(value), url.PathEscape(ph))
	add(html.EscapeString(value), html.EscapeString(ph))
	for _, html := range []bool{true, false} {
		v, p := jsonString(value, html), jsonString(ph, html)
		add(v, p)
		add(strings.ReplaceAll(v, "/", `\/`), strings.ReplaceAll(p, "/", `\/`))
	}
	return out
}

// base64Core returns the characters of the base64 encoding of s that
// depend on s alone when s starts k bytes (0 to 2) into the encoded text.
func base64Core(enc *base64.Encoding, s string, k int) string {
	full := enc.EncodeToString(append(make([]byte, k), s...))
	// Character c holds bits [6c, 6c+6); s holds bits [8k, 8(k+len(s))).
	first := (8*k + 5) / 6
	last := (8*(k+len(s)) - 6) / 6
	if last < first || last >= len(full) {
		return ""
	}
	return full[first : last+1]
}

// jsonString is s as a JSON string's content, without the quotes.
func jsonString(s string, escapeHTML bool) string {
	var b strings.Builder
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(escapeHTML)
	if err := e.Encode(s); err != nil {
		return ""
	}
	out := strings.TrimSuffix(b.String(), "\n")
	return strings.TrimSuffix(strings.TrimPrefix(out, `"`), `"`)
}
