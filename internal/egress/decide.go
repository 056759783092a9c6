package egress

import "net/netip"

// This file holds the engine's decisions about where a request goes once
// it is allowed, as pure functions of the Policy, so that the proxy and
// the tests that hold plan's classification to the engine
// (classify_test.go) use the same code. The decisions on whether a
// connection and a request are allowed are flowKind (policy.go),
// checkRequest (rules.go) and rewriteRequest (secrets.go), which also
// refuses a value that would cross plain HTTP to a destination its
// secret's plain_http does not list.

// dialTarget says where the host dials name: the address a hosts mapping
// pins it to (ok), or else the public addresses name resolves to on the
// host (dialUpstream). A mapping names the port too, so every port of a
// mapped name is dialled at the mapping's address.
func (p *Policy) dialTarget(name string) (addr netip.AddrPort, ok bool) {
	addr, ok = p.hosts[name]
	return addr, ok
}
