package policy

import (
	"fmt"
	"slices"
)

// This file says, the way the egress engine decides it, where the guest's
// connections to a name go and where a secret is sent, for Compare.
// The engine's own functions are in internal/egress (flowKind,
// dialTarget, rewriteRequest); its tests hold Compare to them.

// Reaches reports whether the guest may open any connection to name: an
// allow rule matches it or a tcp rule names it. Only then does DNS answer
// a name a hosts mapping pins (UsedHosts).
func (p Sandbox) Reaches(name string) bool {
	if len(p.RulesFor(name)) > 0 {
		return true
	}
	for _, r := range p.TCP {
		if r.Dest.Host == name {
			return true
		}
	}
	return false
}

// UsedHosts returns the hosts mappings whose names p reaches, in p's
// order. The others are unused: the guest cannot connect to their
// names, DNS does not answer them, and Compare does not count them
// (package lang warns about them).
func (p Sandbox) UsedHosts() []HostMapping {
	var used []HostMapping
	for _, m := range p.Hosts {
		if p.Reaches(m.Name) {
			used = append(used, m)
		}
	}
	return used
}

// dialTarget is the address a hosts mapping pins name to; "" when name
// is dialled at the addresses public DNS gives.
func (p Sandbox) dialTarget(name string) string {
	for _, m := range p.Hosts {
		if m.Name == name {
			return m.Addr
		}
	}
	return ""
}

func (p Sandbox) tcpRule(name string, port uint16) bool {
	for _, r := range p.TCP {
		if r.Dest == (HostPort{Host: name, Port: port}) {
			return true
		}
	}
	return false
}

// sentTo reports whether one of s's hosts matches host, or host is the
// token endpoint's of an OAuth login (which its refresh token goes to).
func (s SecretBinding) sentTo(host string) bool {
	if s.OAuth != nil && s.OAuth.TokenHost() == host {
		return true
	}
	return slices.ContainsFunc(s.Hosts, func(h HostPattern) bool { return h.Match(host) })
}

// secretRoute is one way a secret leaves the host: to a port of a name,
// dialled at dest ("" for public DNS). Whether it may cross that port in
// clear text is the secret's plain_http, which compareSecretPlaces
// classifies.
type secretRoute struct {
	port uint16
	dest string
}

// secretRoutes lists how secret s is sent with requests to host: on every
// port the engine inspects (80, and 443 unless every rule matching host
// is passthrough; neither when a tcp rule splices that port), provided
// an allow rule matches host and one of s's hosts does. The guest may
// speak TLS on port 80 too, so port 80 is a route even when clear text
// is refused.
func (p Sandbox) secretRoutes(s SecretBinding, host string) []secretRoute {
	if !s.sentTo(host) {
		return nil
	}
	rules := p.RulesFor(host)
	if len(rules) == 0 {
		return nil
	}
	var out []secretRoute
	dest := p.dialTarget(host)
	if !p.tcpRule(host, 80) {
		out = append(out, secretRoute{port: 80, dest: dest})
	}
	if !p.tcpRule(host, 443) && !allPassthrough(rules) {
		out = append(out, secretRoute{port: 443, dest: dest})
	}
	return out
}

// compareSecretRoutes finds where a secret kept on both sides is sent
// that it was not, for hosts its hosts list matched before too and the
// old policy allowed (compareSecrets and compareAllow report the rest):
// to another address (a hosts mapping added, changed or removed), to a
// port that is now inspected (passthrough or a tcp rule gone). Each is a
// widening.
func compareSecretRoutes(old, new Sandbox) []Change {
	oldByName := map[string]SecretBinding{}
	for _, s := range old.Secrets {
		oldByName[s.Name] = s
	}
	var classes []HostPattern
	seen := map[HostPattern]bool{}
	addClass := func(p HostPattern) {
		if !seen[p] {
			seen[p] = true
			classes = append(classes, p)
		}
	}
	for _, sb := range []Sandbox{old, new} {
		for _, r := range sb.Allow {
			addClass(r.Pattern)
		}
		for _, s := range sb.Secrets {
			for _, h := range s.Hosts {
				addClass(h)
			}
			if s.OAuth != nil {
				addClass(HostPattern{Suffix: s.OAuth.TokenHost()})
			}
		}
		for _, m := range sb.Hosts {
			addClass(HostPattern{Suffix: m.Name})
		}
		for _, r := range sb.TCP {
			addClass(HostPattern{Suffix: r.Dest.Host})
		}
	}
	var cs []Change
	for _, s := range new.Secrets {
		o, ok := oldByName[s.Name]
		if !ok {
			continue
		}
		for _, c := range classes {
			host := classHost(c)
			if !o.sentTo(host) || len(old.RulesFor(host)) == 0 {
				continue
			}
			before := old.secretRoutes(o, host)
			for _, r := range new.secretRoutes(s, host) {
				if slices.Contains(before, r) {
					continue
				}
				cs = append(cs, Change{Direction: Widen, Op: RuleModified, Kind: "secret.hosts", Subject: s.Name,
					Detail: describeRoute(s.Name, c, r, before), Origin: s.Origin})
				break
			}
		}
	}
	return cs
}

func describeRoute(name string, hosts HostPattern, r secretRoute, before []secretRoute) string {
	where := func(dest string) string {
		if dest == "" {
			return "wherever public DNS points"
		}
		return "at " + dest
	}
	if len(before) > 0 && r.dest != before[0].dest {
		return fmt.Sprintf("secret %s is sent to %s %s instead of %s", name, describeHosts(hosts), where(r.dest), where(before[0].dest))
	}
	return fmt.Sprintf("secret %s is now also sent to %s on port %d, whose requests are now inspected", name, describeHosts(hosts), r.port)
}
