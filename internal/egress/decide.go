package egress

import "net/netip"

// This file holds the engine's decisions about where a request goes once
// it is allowed, as pure functions of the Policy, so that the proxy and
// the tests that hold plan's classification to the engine
// (classify_test.go) use the same code. The decisions on whether a
// connection and a request are allowed are flowKind (policy.go),
// checkRequest (rules.go) and rewriteRequest (secrets.go).

// dialTarget says where the host dials name: the address a hosts mapping
// pins it to (ok), or else the public addresses name resolves to on the
// host (dialUpstream). A mapping names the port too, so every port of a
// mapped name is dialled at the mapping's address.
func (p *Policy) dialTarget(name string) (addr netip.AddrPort, ok bool) {
	addr, ok = p.hosts[name]
	return addr, ok
}

// clearSecretsAllowed reports whether a request to name into whose
// headers the real values of secrets were substituted may go upstream
// over plain HTTP: only to a name a hosts mapping pins (a local
// fixture), never across the network in the clear.
func (p *Policy) clearSecretsAllowed(name string) bool {
	return p.mapped(name)
}
