// Package netstack is a sandbox's network: a userspace TCP/IP stack
// (gVisor's netstack) on the host's end of the guest's one virtio-net
// device, with the egress policy's decisions at its edges. A *Network is
// the machine.Network a sandbox's machine serves its "-netdev stream"
// socket with.
//
// What the guest sees (GuestConfig): address 10.83.0.2/24, gateway and
// DNS server 10.83.0.1, MTU 1500, IPv4 only. What it can do:
//
//   - Ask the gateway DNS (UDP or TCP port 53). A and AAAA queries for a
//     name Options.Resolve allows get a synthetic address from
//     198.18.0.0/15 (AAAA gets an empty answer), the same one for the
//     life of the Network; every other name gets NXDOMAIN and every
//     other query type REFUSED. Nothing is ever asked upstream.
//   - Open TCP connections to a synthetic address DNS gave out, on a port
//     Options.Accept allows for the name behind it; Options.Handle gets
//     each one as a Flow and a net.Conn. Every other destination — an IP
//     the guest made up, loopback, link-local (cloud metadata), private
//     ranges, the gateway but for DNS — is reset at once.
//   - Ping the gateway.
//
// Everything else is dropped: UDP but DNS to the gateway, other IP
// protocols, IPv6, fragments, packets with another source address. Each
// refusal is reported to Options.Deny as a Denial, at a bounded rate.
//
// The package never dials anything, on the host or anywhere: there is no
// forwarding or NAT. What happens to an accepted connection (TLS
// interception, splicing to an upstream, the audit log) is Handle's, in
// the packages above this one; this package decides only which
// connections exist. The policy itself comes in as the Options functions,
// so that this package knows nothing of its rules.
//
// A guest is hostile and may flood the stack: open flows (MaxConns),
// handshakes in progress (MaxPending, HandshakeTimeout), buffers per flow
// (RecvBuffer), DNS names (MaxNames), DNS queries (DNSRate) and reported
// denials (DenialRate) are all bounded, and no frame the guest can write
// makes the Network fail: only the stream's framing breaking does.
//
// A supervisor uses it as:
//
//	n, err := netstack.New(netstack.Options{Resolve: ..., Accept: ..., Handle: ..., Deny: ...})
//	// machine.Options.Network = n; n.GuestConfig() goes to the guest agent
//	// at boot, which configures eth0, the route and resolv.conf with it.
//	// On a policy reload: swap what Resolve and Accept consult, then
//	// n.CloseFlows(func(f netstack.Flow) bool { return !allowed(f.Name, f.Port) }).
package netstack
