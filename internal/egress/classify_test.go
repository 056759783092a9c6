package egress

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/policy"
	"github.com/sbx-dev/sbx/policy/match"
)

// The tests in this file hold plan's classification of a policy change
// (policy.Compare, whose changes plan prints and -fail-on-widen counts)
// to what this engine enforces. They make random pairs of policies, ask
// the engine's own decision functions (flowKind, checkRequest,
// formOf, match.AnyRef, rewriteRequest, dialTarget, composed in the order handle applies them) about random
// requests under each, and require:
//
//   - whenever a request is let through under the new policy that the old
//     one refused, goes to another destination (a mapped address instead
//     of public DNS, or another mapped address), or is seen less (spliced
//     instead of inspected), Compare reports at least one widening
//     change; a request carrying a secret's placeholder is let through
//     only when the value is substituted, so a secret sent where it was
//     not is such a request;
//   - whenever Compare reports neither widening nor narrowing, no
//     request's outcome changed.

// chooser makes the generator's choices: from a seeded source in
// TestClassificationFollowsEngine, from the fuzzer's bytes in
// FuzzClassification.
type chooser interface{ intn(n int) int }

type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(n int) int { return c.r.IntN(n) }

// byteChooser takes one byte per choice; once they run out, every choice
// is the first.
type byteChooser struct{ b []byte }

func (c *byteChooser) intn(n int) int {
	if len(c.b) == 0 {
		return 0
	}
	v := int(c.b[0])
	c.b = c.b[1:]
	return v % n
}

// The universe the generator draws from is small, so that patterns
// overlap, rules collide and requests hit them.
var (
	genNames    = []string{"example.com", "api.example.com", "a.api.example.com", "b.example.com", "github.com", "api.github.com"}
	genPatterns = append(slices.Clone(genNames), "*.example.com", "*.api.example.com", "*.github.com")
	genHosts    = append(slices.Clone(genNames), "zz.example.com", "zz.api.example.com", "zz.github.com", "other.test")
	genMethods  = []string{"GET", "POST", "PUT", "DELETE"}
	genPathPats = []string{"/a", "/a/*", "/a/**", "/**", "/b", "/*/b", "/a/b", "/repos/org/repo/issues"}
	genPaths    = []string{"/", "/a", "/a/b", "/a/c", "/b", "/c/b", "/a/b/c", "/repos/org/repo/issues",
		"/a/git-receive-pack", "/x/git-receive-pack", "/a/./b", "/a%2Fb", "/a/"}
	genRefPats = []string{"refs/heads/main", "refs/heads/agent/*", "refs/heads/**", "refs/tags/*"}
	genRefs    = []string{"refs/heads/main", "refs/heads/agent/x", "refs/heads/dev", "refs/tags/v1"}
	genAddrs   = []string{"127.0.0.1:8443", "127.0.0.2:8443"}
	genTCP     = []uint16{22, 80, 443, 8080}
	// Probes also use a method no rule names.
	genProbeMethods = append(slices.Clone(genMethods), "PATCH")
	genSecrets      = []string{"s1", "s2"}
)

type gen struct{ c chooser }

func (g gen) pick(list []string) string { return list[g.c.intn(len(list))] }

func (g gen) chance(in int) bool { return g.c.intn(in) == 0 }

// subset returns a non-empty subset of list, in list's order.
func (g gen) subset(list []string) []string {
	var out []string
	for _, s := range list {
		if g.chance(3) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		out = []string{g.pick(list)}
	}
	return out
}

func (g gen) rule(pattern string, line int) policy.AllowRule {
	r := policy.AllowRule{Pattern: policy.MustHostPattern(pattern), Origin: policy.Origin{Block: "egress.e", File: "main.hcl", Line: line}}
	if g.chance(6) {
		// A passthrough rule has no request rules (package lang and
		// policy.MergeAllow see to it).
		r.Passthrough = true
		return r
	}
	if g.chance(2) {
		r.Methods = g.subset(genMethods)
	}
	if g.chance(2) {
		r.Paths = g.subset(genPathPats)
	}
	if g.chance(4) {
		r.GitPush = g.subset(genRefPats)
	}
	return r
}

func (g gen) secret(name string) policy.SecretBinding {
	s := policy.SecretBinding{Name: name, Env: strings.ToUpper(name), Source: "env:" + strings.ToUpper(name),
		Origin: policy.Origin{Block: "secret." + name}}
	for _, p := range g.subset(genPatterns) {
		if len(s.Hosts) < 2 {
			s.Hosts = append(s.Hosts, policy.MustHostPattern(p))
		}
	}
	if g.chance(3) {
		g.togglePlain(&s)
	}
	g.secretKind(&s)
	return s
}

// togglePlain adds to s's plain_http, or takes out, port 80 of a name
// its hosts match (package lang allows no other entry).
func (g gen) togglePlain(s *policy.SecretBinding) {
	name := g.pick(genNames)
	if !slices.ContainsFunc(s.Hosts, func(h policy.HostPattern) bool { return h.Match(name) }) {
		return
	}
	hp := policy.HostPort{Host: name, Port: 80}
	if i := slices.Index(s.PlainHTTP, hp); i >= 0 {
		s.PlainHTTP = slices.Delete(s.PlainHTTP, i, i+1)
	} else {
		s.PlainHTTP = append(s.PlainHTTP, hp)
	}
}

func (g gen) sandbox() policy.Sandbox {
	var p policy.Sandbox
	for i, pat := range genPatterns {
		if g.chance(3) {
			p.Allow = append(p.Allow, g.rule(pat, i+1))
		}
	}
	for n := g.c.intn(3); n > 0; n-- {
		g.addTCP(&p)
	}
	for _, name := range genNames {
		if g.chance(5) {
			p.Hosts = append(p.Hosts, policy.HostMapping{Name: name, Addr: g.pick(genAddrs)})
		}
	}
	for _, s := range genSecrets {
		if g.chance(2) {
			p.Secrets = append(p.Secrets, g.secret(s))
		}
	}
	return p
}

func (g gen) addTCP(p *policy.Sandbox) {
	d := policy.HostPort{Host: g.pick(genNames), Port: genTCP[g.c.intn(len(genTCP))]}
	for _, r := range p.TCP {
		if r.Dest == d {
			return
		}
	}
	p.TCP = append(p.TCP, policy.TCPRule{Dest: d})
}

func clonePolicy(p policy.Sandbox) policy.Sandbox {
	q := p
	q.Allow = nil
	for _, r := range p.Allow {
		r.Methods, r.Paths, r.GitPush = slices.Clone(r.Methods), slices.Clone(r.Paths), slices.Clone(r.GitPush)
		q.Allow = append(q.Allow, r)
	}
	q.TCP, q.Hosts = slices.Clone(p.TCP), slices.Clone(p.Hosts)
	q.Secrets = nil
	for _, s := range p.Secrets {
		s.Hosts, s.PlainHTTP, s.Body = slices.Clone(s.Hosts), slices.Clone(s.PlainHTTP), slices.Clone(s.Body)
		q.Secrets = append(q.Secrets, s)
	}
	return q
}

// toggle adds s to list or takes it out.
func toggle(list []string, s string) []string {
	if i := slices.Index(list, s); i >= 0 {
		return slices.Delete(slices.Clone(list), i, i+1)
	}
	return append(slices.Clone(list), s)
}

// mutate returns p changed in one to three small ways, the kind of edit
// a pull request makes.
func (g gen) mutate(p policy.Sandbox) policy.Sandbox {
	q := clonePolicy(p)
	for n := 1 + g.c.intn(3); n > 0; n-- {
		switch g.c.intn(9) {
		case 0: // add or replace a rule
			r := g.rule(g.pick(genPatterns), 90)
			q.Allow = slices.DeleteFunc(q.Allow, func(a policy.AllowRule) bool { return a.Pattern == r.Pattern })
			q.Allow = append(q.Allow, r)
		case 1: // remove a rule
			if len(q.Allow) > 0 {
				i := g.c.intn(len(q.Allow))
				q.Allow = slices.Delete(q.Allow, i, i+1)
			}
		case 2: // passthrough on or off
			if len(q.Allow) > 0 {
				r := &q.Allow[g.c.intn(len(q.Allow))]
				r.Passthrough = !r.Passthrough
				if r.Passthrough {
					r.Methods, r.Paths, r.GitPush = nil, nil, nil
				}
			}
		case 3, 4: // edit one request list: one entry in or out, or the whole list
			if len(q.Allow) == 0 {
				break
			}
			r := &q.Allow[g.c.intn(len(q.Allow))]
			if r.Passthrough {
				break
			}
			lists := []struct {
				l    *[]string
				from []string
			}{{&r.Methods, genMethods}, {&r.Paths, genPathPats}, {&r.GitPush, genRefPats}}
			l := lists[g.c.intn(len(lists))]
			switch g.c.intn(3) {
			case 0:
				*l.l = nil
			case 1:
				*l.l = g.subset(l.from)
			default:
				*l.l = toggle(*l.l, g.pick(l.from))
				if len(*l.l) == 0 {
					*l.l = nil
				}
			}
		case 5: // a hosts mapping added, moved or removed
			name := g.pick(genNames)
			i := slices.IndexFunc(q.Hosts, func(m policy.HostMapping) bool { return m.Name == name })
			switch {
			case i < 0:
				q.Hosts = append(q.Hosts, policy.HostMapping{Name: name, Addr: g.pick(genAddrs)})
			case g.chance(2):
				q.Hosts = slices.Delete(q.Hosts, i, i+1)
			default:
				q.Hosts[i].Addr = g.pick(genAddrs)
			}
		case 6: // a secret's hosts edited, or the secret added or removed
			name := g.pick(genSecrets)
			i := slices.IndexFunc(q.Secrets, func(s policy.SecretBinding) bool { return s.Name == name })
			switch {
			case i < 0:
				q.Secrets = append(q.Secrets, g.secret(name))
			case g.chance(3):
				q.Secrets = slices.Delete(q.Secrets, i, i+1)
			case g.chance(3):
				if q.Secrets[i].AWS == nil {
					g.togglePlain(&q.Secrets[i])
				}
			case g.chance(2):
				g.editKind(&q.Secrets[i])
			default:
				hp := policy.MustHostPattern(g.pick(genPatterns))
				s := &q.Secrets[i]
				if j := slices.Index(s.Hosts, hp); j >= 0 && len(s.Hosts) > 1 {
					s.Hosts = slices.Delete(s.Hosts, j, j+1)
				} else if j < 0 {
					s.Hosts = append(s.Hosts, hp)
				}
			}
		case 7: // a tcp rule added or removed
			if len(q.TCP) > 0 && g.chance(2) {
				i := g.c.intn(len(q.TCP))
				q.TCP = slices.Delete(q.TCP, i, i+1)
			} else {
				g.addTCP(&q)
			}
		case 8: // something else entirely
			q = g.sandbox()
		}
	}
	return q
}

// probe is one request, or one connection, the guest makes.
type probe struct {
	host   string
	port   uint16
	tls    bool
	method string
	path   string // as sent, percent-escaped
	// pushRef, when set, makes the request a git push (receive-pack
	// content type) updating that ref.
	pushRef string
	// secret, when set, puts that secret's placeholder in the request's
	// Authorization header (for an OAuth login, its access placeholder),
	// or signs the request with it when aws names a service and region,
	// or puts it in the body field body names, when set.
	secret string
	aws    [2]string
	body   policy.BodyField
	// refresh makes the request a refresh at a token endpoint, carrying
	// a login's refresh placeholder (the login is the engine's to find).
	refresh bool
}

func (q probe) String() string {
	scheme := "http"
	if q.tls {
		scheme = "https"
	}
	s := fmt.Sprintf("%s %s://%s:%d%s", q.method, scheme, q.host, q.port, q.path)
	if q.pushRef != "" {
		s += " pushing " + q.pushRef
	}
	if q.secret != "" {
		s += " with secret " + q.secret
	}
	if q.aws[0] != "" {
		s += " signed for " + q.aws[0] + " in " + q.aws[1]
	}
	if q.body != (policy.BodyField{}) {
		s += " in body field " + q.body.Form + q.body.JSON
	}
	if q.refresh {
		s += " refreshing a login"
	}
	return s
}

func (g gen) probe() probe {
	q := probe{host: g.pick(genHosts), method: g.pick(genProbeMethods), path: g.pick(genPaths)}
	switch g.c.intn(5) {
	case 0:
		q.port, q.tls = 80, g.chance(4)
	case 1:
		q.port, q.tls = genTCP[g.c.intn(len(genTCP))], g.chance(2)
	default:
		q.port, q.tls = 443, true
	}
	if q.method == "POST" && g.chance(2) {
		q.pushRef = g.pick(genRefs)
	}
	if g.chance(2) {
		q.secret = g.pick(genSecrets)
		switch g.c.intn(4) {
		case 0:
			q.aws = [2]string{g.pick(genServices), g.pick(genRegions)}
		case 1:
			q.body = genFields[g.c.intn(len(genFields))]
			q.method = "POST"
		}
	}
	return q
}

// outcome is what the engine does with a probe.
type outcome struct {
	allowed bool
	kind    flowKind
	dest    string   // where the host dials: a mapped address or "public DNS"
	secrets []string // the secrets substituted
	why     string   // for a refusal
}

func (o outcome) String() string {
	if !o.allowed {
		return "refused (" + o.why + ")"
	}
	s := fmt.Sprintf("allowed, %s, dialled at %s", o.kind, o.dest)
	if len(o.secrets) > 0 {
		s += ", secrets " + strings.Join(o.secrets, ", ")
	}
	return s
}

func secretValue(name string) string       { return "value-of-" + name + "-0123456789" }
func secretPlaceholder(name string) string { return "sbx-placeholder-" + name + "-ZZZZ" }

func compileForTest(p policy.Sandbox) (*Policy, error) {
	return compileKinds(p)
}

// decide asks the engine's decision functions about q, in the order
// ServeFlow, serveWeb and handle apply them.
func decide(p *Policy, q probe) outcome {
	name := canonicalName(q.host)
	kind := p.flowKind(name, q.port)
	o := outcome{kind: kind, dest: "public DNS"}
	if ap, ok := p.dialTarget(name); ok {
		o.dest = ap.String()
	}
	switch {
	case kind == kindDeny:
		o.why = "no rule for the connection"
		return o
	case kind == kindTCP:
		o.allowed = true
		return o
	case kind == kindPassthrough && !q.tls, kind == kindHTTP && q.port == 443 && !q.tls:
		o.why = "not TLS"
		return o
	case kind == kindPassthrough:
		o.allowed = true
		return o
	}
	u, err := url.Parse(q.path)
	if err != nil {
		panic(err)
	}
	r := &http.Request{Method: q.method, URL: u, Header: http.Header{}, RequestURI: q.path, Host: q.host}
	if q.pushRef != "" {
		r.Header.Set("Content-Type", "application/x-git-receive-pack-request")
	}
	ph := secretPlaceholder(q.secret)
	if l := classifyCredentials().logins[q.secret]; l != nil && q.secret != "" && p.isLogin(q.secret) {
		ph = l.AccessPlaceholder()
	}
	var body string
	switch {
	case q.refresh:
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		body = "grant_type=refresh_token&refresh_token=placeholder"
	case q.secret != "" && q.aws[0] != "":
		r.URL.Scheme, r.URL.Host = "https", q.host
		signProbe(r, q.secret, q.aws)
	case q.secret != "" && q.body != (policy.BodyField{}):
		var ct string
		ct, body = probeBody(q, ph)
		r.Header.Set("Content-Type", ct)
	case q.secret != "":
		r.Header.Set("Authorization", "Bearer "+ph)
	}
	if body != "" {
		r.Body, r.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
	}
	v := p.checkRequest(name, formOf(r))
	if !v.allowed {
		o.why = v.reason
		return o
	}
	if ls := p.refreshFor(name, q.port, q.tls, r); ls != nil {
		// The refresh token goes to the token endpoint (serveRefresh).
		o.allowed, o.secrets = true, []string{ls.Name + " refresh token"}
		return o
	}
	if q.refresh {
		o.why = "no login refreshes there"
		return o
	}
	awsReq, d := p.checkAWS(name, q.tls, r)
	if d != nil {
		o.why = d.reason
		return o
	}
	unescaped, _ := url.QueryUnescape(r.URL.RawQuery)
	sub, d := p.rewriteRequest(name, q.port, q.tls, r.Header, r.RequestURI+" "+r.URL.Path+" "+unescaped)
	if d != nil {
		o.why = d.reason
		return o
	}
	logins, _, d := p.rewriteLogins(name, q.port, q.tls, r.Header, r.RequestURI+" "+r.URL.Path+" "+unescaped)
	if d != nil {
		o.why = d.reason
		return o
	}
	for _, l := range logins {
		// A login's access token is another credential than the whole
		// value a header secret of the same name sends.
		sub.used = append(sub.used, l+" access token")
	}
	bodyUsed, bd := p.rewriteBody(name, q.port, q.tls, r)
	if bd != nil {
		o.why = bd.reason
		return o
	}
	sub.used = append(sub.used, bodyUsed...)
	if awsReq != nil {
		sub.used = append(sub.used, awsReq.cred.binding.Name)
	}
	if body != "" && len(bodyUsed) == 0 {
		// What bodyScanner would find in the body as it streams.
		unbound, _ := p.scanFor(name)
		for _, s := range append(unbound, p.bodyOnlyFor(name, r.URL.EscapedPath())...) {
			if strings.Contains(body, s.placeholder) {
				o.why = "the placeholder of " + s.Name + " in the body"
				return o
			}
		}
	}
	if q.secret != "" && !slices.Contains(sub.used, q.secret) && !slices.Contains(sub.used, q.secret+" access token") {
		// The policy has no such secret, so the "placeholder" is plain
		// text and no secret is sent: the probe asks only about sending
		// the secret, and counts as refused.
		o.why = "no secret " + q.secret + " to send"
		return o
	}
	if v.pushRefs != nil && q.pushRef != "" && !match.AnyRef(v.pushRefs, q.pushRef) {
		o.why = "push ref refused"
		return o
	}
	o.allowed, o.secrets = true, sub.used
	return o
}

// wider reports whether n lets q do more than o: through where it was
// refused, to another destination, or seen less.
func wider(o, n outcome) bool {
	switch {
	case !n.allowed:
		return false
	case !o.allowed:
		return true
	case n.dest != o.dest:
		return true
	}
	for _, s := range n.secrets {
		if !slices.Contains(o.secrets, s) {
			return true
		}
	}
	// Seen less: inspected < spliced TLS < raw TCP.
	return n.kind > o.kind && (o.kind == kindHTTP || n.kind == kindTCP)
}

func sameOutcome(o, n outcome) bool {
	return o.allowed == n.allowed && (!o.allowed || o.kind == n.kind && o.dest == n.dest && slices.Equal(o.secrets, n.secrets))
}

// checkPair checks Compare(old, new) against the engine on probes and
// returns what it finds wrong, one line each (none when it holds).
func checkPair(old, new policy.Sandbox, probes []probe) ([]string, error) {
	po, err := compileForTest(old)
	if err != nil {
		return nil, fmt.Errorf("compiling old: %v", err)
	}
	pn, err := compileForTest(new)
	if err != nil {
		return nil, fmt.Errorf("compiling new: %v", err)
	}
	changes := policy.Compare(old, new)
	widens, moves := false, false
	for _, c := range changes {
		widens = widens || c.Direction == policy.Widen
		moves = moves || c.Direction != policy.Neutral
	}
	var bad []string
	for _, q := range probes {
		o, n := decide(po, q), decide(pn, q)
		switch {
		case !widens && wider(o, n):
			bad = append(bad, fmt.Sprintf("no widening reported, yet %s: old %s; new %s", q, o, n))
		case !moves && !sameOutcome(o, n):
			bad = append(bad, fmt.Sprintf("no widening or narrowing reported, yet %s: old %s; new %s", q, o, n))
		}
	}
	return bad, nil
}

// describePolicy renders a policy compactly for failure messages.
func describePolicy(p policy.Sandbox) string {
	var parts []string
	for _, r := range p.Allow {
		s := r.Pattern.String()
		var attrs []string
		if r.Passthrough {
			attrs = append(attrs, "passthrough")
		}
		if len(r.Methods) > 0 {
			attrs = append(attrs, "methods "+strings.Join(r.Methods, ","))
		}
		if len(r.Paths) > 0 {
			attrs = append(attrs, "paths "+strings.Join(r.Paths, ","))
		}
		if len(r.GitPush) > 0 {
			attrs = append(attrs, "git_push "+strings.Join(r.GitPush, ","))
		}
		if len(attrs) > 0 {
			s += " {" + strings.Join(attrs, "; ") + "}"
		}
		parts = append(parts, "allow "+s)
	}
	for _, r := range p.TCP {
		parts = append(parts, "tcp "+r.Dest.String())
	}
	for _, m := range p.Hosts {
		parts = append(parts, "hosts "+m.Name+"="+m.Addr)
	}
	for _, s := range p.Secrets {
		var hs []string
		for _, h := range s.Hosts {
			hs = append(hs, h.String())
		}
		d := "secret " + s.Name + " -> " + strings.Join(hs, ",")
		for _, hp := range s.PlainHTTP {
			d += " plain_http " + hp.String()
		}
		if s.AWS != nil {
			d += " aws " + strings.Join(s.AWS.Services, ",") + " in " + strings.Join(s.AWS.Regions, ",")
		}
		if s.OAuth != nil {
			d += " oauth " + s.OAuth.TokenURL
		}
		for _, b := range s.Body {
			d += " body " + b.Key()
		}
		parts = append(parts, d)
	}
	if len(parts) == 0 {
		return "(nothing)"
	}
	return strings.Join(parts, "; ")
}

func describeChanges(cs []policy.Change) string {
	if len(cs) == 0 {
		return "(none)"
	}
	var lines []string
	for _, c := range cs {
		lines = append(lines, fmt.Sprintf("[%s] %s", c.Direction, c.Detail))
	}
	return strings.Join(lines, "\n\t\t")
}

// runPair generates a pair and its probes with g and reports what
// checkPair finds.
func runPair(t *testing.T, g gen) bool {
	t.Helper()
	old := g.sandbox()
	new := g.mutate(old)
	if g.chance(4) {
		old, new = new, old
	}
	probes := make([]probe, 60)
	for i := range probes {
		probes[i] = g.probe()
	}
	// Random probes seldom hit a plain_http entry (a name, port 80, no
	// TLS, that secret): ask each entry of either side directly.
	probes = append(probes, kindProbes(g, old, new)...)
	for _, sb := range []policy.Sandbox{old, new} {
		for _, s := range sb.Secrets {
			for _, hp := range s.PlainHTTP {
				probes = append(probes, probe{host: hp.Host, port: hp.Port, method: g.pick(genProbeMethods), path: g.pick(genPaths), secret: s.Name})
			}
		}
	}
	return reportPair(t, old, new, probes)
}

func reportPair(t *testing.T, old, new policy.Sandbox, probes []probe) bool {
	t.Helper()
	bad, err := checkPair(old, new, probes)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) == 0 {
		return true
	}
	if len(bad) > 3 {
		bad = append(bad[:3], fmt.Sprintf("and %d more", len(bad)-3))
	}
	t.Errorf("plan's classification disagrees with the engine:\n\told: %s\n\tnew: %s\n\tchanges:\n\t\t%s\n\t%s",
		describePolicy(old), describePolicy(new), describeChanges(policy.Compare(old, new)), strings.Join(bad, "\n\t"))
	return false
}

// TestClassificationFollowsEngine: a fixed seed and a bounded number of
// random policy pairs (a few seconds); FuzzClassification explores
// further.
func TestClassificationFollowsEngine(t *testing.T) {
	pairs := 5000
	if testing.Short() {
		pairs = 500
	}
	g := gen{c: randChooser{rand.New(rand.NewPCG(18, 4))}}
	failures := 0
	for i := 0; i < pairs && failures < 5; i++ {
		if !runPair(t, g) {
			failures++
		}
	}
}

// TestClassificationFindings replays, through the same check, policy
// changes that plan once classified wrongly.
func TestClassificationFindings(t *testing.T) {
	gh := func(pattern string, edit func(*policy.AllowRule)) policy.AllowRule {
		r := policy.AllowRule{Pattern: policy.MustHostPattern(pattern), Origin: policy.Origin{Block: "egress.gh"}}
		if edit != nil {
			edit(&r)
		}
		return r
	}
	var probes []probe
	for _, host := range []string{"api.github.com", "zz.github.com"} {
		for _, m := range genMethods {
			for _, path := range genPaths {
				probes = append(probes, probe{host: host, port: 443, tls: true, method: m, path: path})
			}
		}
	}
	api := policy.MustHostPattern("api.test")
	for _, port := range []uint16{80, 443} {
		probes = append(probes, probe{host: "api.test", port: port, tls: port == 443, method: "GET", path: "/", secret: "s1"})
	}
	tests := []struct {
		name     string
		old, new policy.Sandbox
	}{
		{
			// Deleting the paths line of the narrower rule lets POST go
			// to any path of api.github.com.
			name: "overlapping request rules",
			old: policy.Sandbox{Allow: []policy.AllowRule{
				gh("*.github.com", func(r *policy.AllowRule) { r.Methods = []string{"GET"} }),
				gh("api.github.com", func(r *policy.AllowRule) {
					r.Methods, r.Paths = []string{"POST"}, []string{"/repos/org/repo/issues"}
				}),
			}},
			new: policy.Sandbox{Allow: []policy.AllowRule{
				gh("*.github.com", func(r *policy.AllowRule) { r.Methods = []string{"GET"} }),
				gh("api.github.com", func(r *policy.AllowRule) { r.Methods = []string{"POST"} }),
			}},
		},
		{
			// Removing the mapping of a secret's host sends the secret
			// wherever public DNS points.
			name: "secret host unmapped",
			old: policy.Sandbox{
				Allow:   []policy.AllowRule{gh("api.test", nil)},
				Hosts:   []policy.HostMapping{{Name: "api.test", Addr: "127.0.0.1:8443"}},
				Secrets: []policy.SecretBinding{{Name: "s1", Env: "S1", Source: "env:S1", Hosts: []policy.HostPattern{api}}},
			},
			new: policy.Sandbox{
				Allow:   []policy.AllowRule{gh("api.test", nil)},
				Secrets: []policy.SecretBinding{{Name: "s1", Env: "S1", Source: "env:S1", Hosts: []policy.HostPattern{api}}},
			},
		},
	}
	// An OAuth login's token endpoint that stops being passthrough takes
	// the refresh token (a change to the allow rule, not the secret).
	tok := policy.OAuth{TokenURL: "https://auth.test/token", RefreshField: "refresh_token", AccessToken: "tokens.access_token", RefreshToken: "tokens.refresh_token"}
	login := policy.SecretBinding{Name: "s1", Env: "S1", Source: "file:auth.json", Hosts: []policy.HostPattern{api}, OAuth: &tok}
	probes = append(probes, probe{host: "auth.test", port: 443, tls: true, method: "POST", path: "/token", refresh: true})
	tests = append(tests, struct {
		name     string
		old, new policy.Sandbox
	}{
		name: "token endpoint no longer passthrough",
		old: policy.Sandbox{Allow: []policy.AllowRule{gh("api.test", nil), gh("auth.test", func(r *policy.AllowRule) { r.Passthrough = true })},
			Secrets: []policy.SecretBinding{login}},
		new: policy.Sandbox{Allow: []policy.AllowRule{gh("api.test", nil), gh("auth.test", nil)},
			Secrets: []policy.SecretBinding{login}},
	})
	// A secret that stops being an AWS credential or an OAuth login, and
	// stays, has its whole value substituted as a header secret's is.
	awsS := policy.SecretBinding{Name: "s1", Env: "S1", Source: "env:S1", Hosts: []policy.HostPattern{api},
		AWS: &policy.AWSCredential{Services: []string{"s3"}, Regions: []string{"us-east-1"}, SecretKeyEnv: "S1_SECRET", SessionTokenEnv: "S1_TOKEN"}}
	plainS := policy.SecretBinding{Name: "s1", Env: "S1", Source: "env:S1", Hosts: []policy.HostPattern{api}}
	for _, kind := range []policy.SecretBinding{awsS, login} {
		plainS.Source = kind.Source
		tests = append(tests, struct {
			name     string
			old, new policy.Sandbox
		}{
			name: "no longer " + map[bool]string{true: "AWS", false: "OAuth"}[kind.AWS != nil],
			old:  policy.Sandbox{Allow: []policy.AllowRule{gh("api.test", nil)}, Secrets: []policy.SecretBinding{kind}},
			new:  policy.Sandbox{Allow: []policy.AllowRule{gh("api.test", nil)}, Secrets: []policy.SecretBinding{plainS}},
		})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reportPair(t, tt.old, tt.new, probes)
		})
	}
}

// FuzzClassification: the fuzzer's bytes make the pair and the probes.
func FuzzClassification(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"))
	f.Add([]byte("overlapping request rules, hosts mappings and secrets"))
	f.Add([]byte{0, 0, 1, 1, 2, 3, 0, 2, 1, 0, 0, 3, 5, 0, 1, 2, 0, 6, 2, 3, 1, 1, 0, 0, 2, 4, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		runPair(t, gen{c: &byteChooser{b: data}})
	})
}
