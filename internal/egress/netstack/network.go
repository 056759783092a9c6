package netstack

import (
	"context"
	"errors"
	"fmt"
	"github.com/sbx-dev/sbx/internal/proto/netstream"
	"net"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
)

// The sandbox's addresses. Every sandbox has the same ones: each has a
// network of its own, so they never meet. 10.83.0.0/24 is private space
// unlikely to be a host's own LAN ("83" for "sbx" nowhere in particular);
// the guest is .2 and the gateway, which is also the DNS server, .1.
var (
	guestPrefix = netip.MustParsePrefix("10.83.0.2/24")
	guestAddr   = guestPrefix.Addr()
	gatewayAddr = netip.MustParseAddr("10.83.0.1")
	// gatewayMAC is locally administered (0x02 in the first byte), so it
	// is no vendor's.
	gatewayMAC = net.HardwareAddr{0x02, 0x83, 0x00, 0x00, 0x00, 0x01}
)

// MTU is the link's MTU: what a virtio-net device gives its guest when
// the host offers no MTU of its own (QEMU's "-netdev stream" offers
// none), the Ethernet default.
const MTU = 1500

const nicID = 1

// Defaults for the Options bounds left zero.
const (
	DefaultMaxConns         = 256
	DefaultMaxPending       = 128
	DefaultRecvBuffer       = 256 << 10
	DefaultMaxNames         = 1 << 16
	DefaultDNSRate          = 200
	DefaultDenialRate       = 100
	DefaultHandshakeTimeout = 5 * time.Second
)

// Options are a Network's policy hooks and bounds.
type Options struct {
	// Resolve says whether a DNS name gets an address (the policy allows
	// it, or a hosts mapping names it). It gets the name in lower case
	// without its trailing dot. Nil resolves nothing.
	Resolve func(name string) bool
	// Accept says whether a TCP connection to name:port is allowed; false
	// resets it at once and reports a Denial. Nil accepts nothing.
	Accept func(name string, port uint16) bool
	// Handle serves an accepted TCP flow; conn is the guest's side of it.
	// It runs in a goroutine of its own; ctx is done once the flow is
	// closed (CloseFlows) or Serve ends. When Handle returns, the network
	// closes conn; it also closes (resets) it when CloseFlows picks it or
	// Serve ends. Nil closes every accepted flow at once.
	Handle func(ctx context.Context, f Flow, conn net.Conn)
	// Deny is given what the network refused, for the audit log, from
	// one goroutine of the network's; nil reports nothing. At most
	// DenialRate a second are reported, and a Deny slower than that
	// loses some: the count is in Dropped.
	Deny func(Denial)

	// MaxConns bounds the TCP flows open at once (DefaultMaxConns); a
	// connection over it is reset and reported.
	MaxConns int
	// MaxPending bounds the TCP handshakes in progress
	// (DefaultMaxPending): SYNs over it are dropped, so that a SYN flood
	// costs at most this many half-open connections.
	MaxPending int
	// HandshakeTimeout is how long a handshake may take before it is
	// abandoned (DefaultHandshakeTimeout). The guest is on the same host:
	// a handshake that takes longer is one the guest does not mean to
	// finish, holding a MaxPending slot.
	HandshakeTimeout time.Duration
	// RecvBuffer bounds each flow's receive and send buffers, in bytes
	// (DefaultRecvBuffer). What the flows can hold at most is about
	// MaxConns × 2 × RecvBuffer (128 MiB with the defaults), reached only
	// if no Handle reads; the link is a socket on the same host, so a
	// window this size already runs as fast as the stacks do.
	RecvBuffer int
	// MaxNames bounds the names DNS gives addresses to (DefaultMaxNames);
	// past it, new names get SERVFAIL.
	MaxNames int
	// DNSRate bounds the DNS queries answered a second (DefaultDNSRate);
	// the rest are dropped.
	DNSRate int
	// DenialRate bounds the Denials reported a second
	// (DefaultDenialRate).
	DenialRate int
}

// Flow is one accepted TCP connection.
type Flow struct {
	// ID is unique among the Network's flows.
	ID uint64
	// Name is the name behind the synthetic address the guest connected
	// to, as Resolve was given it.
	Name string
	// Port is the destination port.
	Port uint16
	// Src is the guest's end; Dst is the synthetic address and port.
	Src, Dst netip.AddrPort
}

// GuestConfig is what the guest must configure on its one network
// device for this network to serve it.
type GuestConfig struct {
	// Addr is the guest's address and the link's prefix.
	Addr netip.Prefix
	// Gateway is the default route's next hop.
	Gateway netip.Addr
	// DNS is the only resolver (resolv.conf's one nameserver).
	DNS netip.Addr
	// MTU is the link's MTU.
	MTU int
	// GatewayMAC is the gateway's Ethernet address, should the guest want
	// a static neighbour entry instead of ARP.
	GatewayMAC net.HardwareAddr
}

// Network is one sandbox's userspace network: it serves the guest's
// Ethernet frames with a TCP/IP stack of its own, answers DNS, and hands
// the TCP connections the policy accepts to Options.Handle. It never
// dials anything itself. A Network serves one connection, once.
type Network struct {
	opts  Options
	names *names
	dns   *bucket
	den   *denials

	served        atomic.Bool
	frames, bytes atomic.Uint64
	synDropped    atomic.Uint64

	// Set by Serve before the first frame is read.
	stk *stack.Stack
	ch  *channel.Endpoint
	fwd *tcp.Forwarder
	ctx context.Context

	mu       sync.Mutex
	closed   bool // Serve has ended: no new flows
	flows    map[uint64]*flow
	reserved int // handshakes under way that will count as flows
	nextID   uint64
	pending  map[stack.TransportEndpointID]uint32 // handshakes: the guest's SYN sequence number
}

type flow struct {
	f      Flow
	ep     tcpip.Endpoint
	conn   net.Conn
	cancel context.CancelFunc
}

var _ netstream.Network = (*Network)(nil)

// The machine reports a Network's counts through Machine.NetStats when
// it has this method.
var _ interface{ Stats() netstream.Stats } = (*Network)(nil)

// New returns a Network with opts' hooks and bounds.
func New(opts Options) (*Network, error) {
	def := func(v *int, d int) error {
		if *v < 0 {
			return fmt.Errorf("netstack: negative bound %d", *v)
		}
		if *v == 0 {
			*v = d
		}
		return nil
	}
	for _, b := range []struct {
		v *int
		d int
	}{
		{&opts.MaxConns, DefaultMaxConns},
		{&opts.MaxPending, DefaultMaxPending},
		{&opts.RecvBuffer, DefaultRecvBuffer},
		{&opts.MaxNames, DefaultMaxNames},
		{&opts.DNSRate, DefaultDNSRate},
		{&opts.DenialRate, DefaultDenialRate},
	} {
		if err := def(b.v, b.d); err != nil {
			return nil, err
		}
	}
	if opts.HandshakeTimeout < 0 {
		return nil, fmt.Errorf("netstack: negative handshake timeout %v", opts.HandshakeTimeout)
	}
	if opts.HandshakeTimeout == 0 {
		opts.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if opts.RecvBuffer < 4096 {
		return nil, fmt.Errorf("netstack: receive buffer of %d bytes is under 4096", opts.RecvBuffer)
	}
	return &Network{
		opts:    opts,
		names:   newNames(opts.MaxNames),
		dns:     newBucket(opts.DNSRate, opts.DNSRate),
		flows:   make(map[uint64]*flow),
		pending: make(map[stack.TransportEndpointID]uint32),
	}, nil
}

// GuestConfig returns what the guest must configure.
func (n *Network) GuestConfig() GuestConfig {
	return GuestConfig{
		Addr:       guestPrefix,
		Gateway:    gatewayAddr,
		DNS:        gatewayAddr,
		MTU:        MTU,
		GatewayMAC: append(net.HardwareAddr(nil), gatewayMAC...),
	}
}

// Stats counts what the guest sent: every frame read, admitted or not.
func (n *Network) Stats() netstream.Stats {
	return netstream.Stats{Frames: n.frames.Load(), Bytes: n.bytes.Load()}
}

// Dropped returns how many Denials were not reported (over DenialRate or
// behind a slow Deny) and how many SYNs were dropped over MaxPending.
func (n *Network) Dropped() (denials, syns uint64) {
	n.mu.Lock()
	den := n.den
	n.mu.Unlock()
	if den != nil {
		denials = den.dropped.Load()
	}
	return denials, n.synDropped.Load()
}

// Serve serves the guest's frames on conn until conn ends (nil) or fails
// (the error) or ctx is done (ctx's error). When it returns every flow is
// closed and the stack is gone. A Network serves once: a second call is
// an error.
func (n *Network) Serve(ctx context.Context, conn net.Conn) error {
	if !n.served.CompareAndSwap(false, true) {
		return errors.New("netstack: this network has already served a connection")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n.ctx = ctx
	den := newDenials(n.opts.Deny, n.opts.DenialRate, 256)
	defer den.close(time.Second)
	n.mu.Lock()
	n.den = den
	n.mu.Unlock()

	if err := n.newStack(); err != nil {
		return err
	}
	var wg sync.WaitGroup
	closeDNS, err := n.startDNS(&wg)
	if err != nil {
		n.stk.Destroy()
		return err
	}

	w := newWire(conn, n.ch)
	w.admit = n.admit
	w.count = func(size int) {
		n.frames.Add(1)
		n.bytes.Add(uint64(size))
	}
	err = w.run(ctx)

	cancel()
	n.mu.Lock()
	n.closed = true
	flows := n.flows
	n.flows = make(map[uint64]*flow)
	n.mu.Unlock()
	for _, fl := range flows {
		fl.close()
	}
	closeDNS()
	n.stk.Destroy()
	n.ch.Close()
	waitFor(&wg, 2*time.Second)
	return err
}

// waitFor waits for wg at most d: everything in wg ends once the stack
// is closed, the bound is for a bug's sake.
func waitFor(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// newStack builds the host's side of the link: one NIC holding the
// gateway's address, in promiscuous mode so that packets to any address
// reach the transport layer, where a SYN to a synthetic address meets
// the policy; and with spoofing, so that replies can come from the
// address the guest wrote to. Nothing routes anywhere but back to the
// guest: the stack has no other NIC.
func (n *Network) newStack() error {
	s := stack.New(stack.Options{
		NetworkProtocols: []stack.NetworkProtocolFactory{
			// Loopback destinations are let in only to be refused with a
			// reset like any other address DNS did not give out, rather
			// than dropped into a connect timeout.
			ipv4.NewProtocolWithOptions(ipv4.Options{AllowExternalLoopbackTraffic: true}),
			arp.NewProtocol,
		},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	fail := func(what string, err tcpip.Error) error {
		s.Destroy()
		return fmt.Errorf("netstack: %s: %s", what, err)
	}
	buf := n.opts.RecvBuffer
	opts := []tcpip.SettableTransportProtocolOption{
		&tcpip.TCPReceiveBufferSizeRangeOption{Min: 4096, Default: buf, Max: buf},
		&tcpip.TCPSendBufferSizeRangeOption{Min: 4096, Default: buf, Max: buf},
	}
	for _, o := range opts {
		if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, o); err != nil {
			return fail("TCP buffer sizes", err)
		}
	}
	sack := tcpip.TCPSACKEnabled(true)
	if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, &sack); err != nil {
		return fail("TCP SACK", err)
	}
	// A closed connection's endpoint stays in TIME_WAIT (or FIN_WAIT_2,
	// waiting for the guest's FIN) for a minute by default, uncounted by
	// MaxConns: a guest connecting in a loop would pile them up. On a
	// link with no delay and no reordering a second is plenty for the
	// stray segments TIME_WAIT is for.
	timeWait := tcpip.TCPTimeWaitTimeoutOption(time.Second)
	if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, &timeWait); err != nil {
		return fail("TCP TIME_WAIT", err)
	}
	finWait := tcpip.TCPLingerTimeoutOption(5 * time.Second)
	if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, &finWait); err != nil {
		return fail("TCP FIN_WAIT_2", err)
	}
	moderate := tcpip.TCPModerateReceiveBufferOption(false)
	if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, &moderate); err != nil {
		return fail("TCP buffer moderation", err)
	}

	ch := channel.New(512, MTU, tcpip.LinkAddress(gatewayMAC))
	if err := s.CreateNIC(nicID, ethernet.New(ch)); err != nil {
		return fail("NIC", err)
	}
	if err := s.AddProtocolAddress(nicID, tcpip.ProtocolAddress{
		Protocol: ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddressWithPrefix{
			Address:   tcpAddr(gatewayAddr),
			PrefixLen: guestPrefix.Bits(),
		},
	}, stack.AddressProperties{}); err != nil {
		return fail("gateway address", err)
	}
	// Off by default; said again because the stack must never route a
	// packet, only answer it.
	if err := s.SetForwardingDefaultAndAllNICs(ipv4.ProtocolNumber, false); err != nil {
		return fail("forwarding", err)
	}
	if err := s.SetPromiscuousMode(nicID, true); err != nil {
		return fail("promiscuous mode", err)
	}
	if err := s.SetSpoofing(nicID, true); err != nil {
		return fail("spoofing", err)
	}
	subnet, _ := tcpip.NewSubnet(tcpAddr(guestPrefix.Masked().Addr()),
		tcpip.MaskFromBytes(net.CIDRMask(guestPrefix.Bits(), 32)))
	s.SetRouteTable([]tcpip.Route{{Destination: subnet, NIC: nicID}})

	// The forwarder's receive window is what bounds an accepted flow's
	// receive buffer (the stack-wide range above bounds send buffers and
	// the DNS listener's connections). Its own bound on handshakes is a
	// second line behind MaxPending, which tcpUnknown keeps.
	n.fwd = tcp.NewForwarder(s, buf, 2*n.opts.MaxPending, n.handleSYN)
	s.SetTransportProtocolHandler(tcp.ProtocolNumber, n.tcpUnknown)
	s.SetTransportProtocolHandler(udp.ProtocolNumber, n.udpUnknown)
	n.stk, n.ch = s, ch
	return nil
}

// admit decides, for each frame the guest sends, whether it reaches the
// stack at all. Only ARP from the guest's address and IPv4 do; an IPv4 packet must come from the
// guest's own address, be whole (fragments are refused, so the stack
// never holds pieces for reassembly), and be TCP, UDP, or ICMP to the
// gateway (which answers echo requests and nothing else is there to
// answer). TCP and UDP meet the policy in the stack, where a refused SYN
// can be answered with a reset.
func (n *Network) admit(frame []byte) bool {
	if len(frame) < header.EthernetMinimumSize {
		return false
	}
	switch header.Ethernet(frame).Type() {
	case header.ARPProtocolNumber:
		// Only the guest's own address may be announced: the stack's
		// neighbour table then never holds anyone else, and the
		// gateway's address cannot be claimed.
		a := header.ARP(frame[header.EthernetMinimumSize:])
		return len(a) >= header.ARPSize && a.IsValid() &&
			netip.AddrFrom4([4]byte(a.ProtocolAddressSender())) == guestAddr
	case header.IPv4ProtocolNumber:
	default:
		return false // IPv6 and the rest: this network is IPv4 only
	}
	ip := header.IPv4(frame[header.EthernetMinimumSize:])
	if len(ip) < header.IPv4MinimumSize || !ip.IsValid(len(ip)) {
		return false
	}
	src, dst := netAddr(ip.SourceAddress()), netAddr(ip.DestinationAddress())
	if dst.IsMulticast() || dst == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return false // the guest's own chatter: nothing here answers it
	}
	if src != guestAddr {
		n.deny("ip", "", netip.AddrPortFrom(dst, 0), "source address "+src.String()+" is not the sandbox's "+guestAddr.String())
		return false
	}
	if ip.More() || ip.FragmentOffset() != 0 {
		n.deny("ip", "", netip.AddrPortFrom(dst, 0), "fragmented IP packet")
		return false
	}
	switch p := ip.TransportProtocol(); p {
	case header.TCPProtocolNumber, header.UDPProtocolNumber:
		return true
	case header.ICMPv4ProtocolNumber:
		if dst == gatewayAddr {
			return true
		}
		n.deny("ip", n.nameOf(dst), netip.AddrPortFrom(dst, 0), "ICMP is answered only by the gateway "+gatewayAddr.String())
		return false
	default:
		n.deny("ip", n.nameOf(dst), netip.AddrPortFrom(dst, 0), fmt.Sprintf("IP protocol %d is not carried", p))
		return false
	}
}

func (n *Network) nameOf(a netip.Addr) string {
	name, _ := n.names.name(a)
	return name
}

func (n *Network) deny(proto, name string, dst netip.AddrPort, reason string) {
	if n.den == nil { // not serving
		return
	}
	n.den.report(Denial{Proto: proto, Name: name, Dst: dst, Reason: reason})
}

// udpUnknown sees every UDP datagram no socket of the stack's takes:
// everything but DNS to the gateway. It is dropped, without an ICMP
// error, and reported.
func (n *Network) udpUnknown(id stack.TransportEndpointID, _ *stack.PacketBuffer) bool {
	dst := netip.AddrPortFrom(netAddr(id.LocalAddress), id.LocalPort)
	n.deny("udp", n.nameOf(dst.Addr()), dst, "UDP is carried only to the sandbox's DNS server "+gatewayAddr.String()+":53")
	return true
}

// Flows returns the open flows in the order they were accepted.
func (n *Network) Flows() []Flow {
	n.mu.Lock()
	out := make([]Flow, 0, len(n.flows))
	for _, fl := range n.flows {
		out = append(out, fl.f)
	}
	n.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// CloseFlows resets every open flow match picks (a host the policy no
// longer allows) and returns how many it closed. Their Handle's context
// is done and their conn fails. Change what Accept says first: a
// connection whose handshake is under way during the call is not yet
// open, and is asked about again once it is.
func (n *Network) CloseFlows(match func(Flow) bool) int {
	var picked []*flow
	n.mu.Lock()
	for id, fl := range n.flows {
		if match(fl.f) {
			picked = append(picked, fl)
			delete(n.flows, id)
		}
	}
	n.mu.Unlock()
	for _, fl := range picked {
		fl.close()
	}
	return len(picked)
}

// close resets the flow: the guest sees its connection reset, Handle its
// context done and its conn fail.
func (fl *flow) close() {
	fl.cancel()
	fl.ep.Abort()
	fl.conn.Close()
}

func tcpAddr(a netip.Addr) tcpip.Address { return tcpip.AddrFrom4(a.As4()) }

func netAddr(a tcpip.Address) netip.Addr {
	if a.Len() != 4 {
		return netip.Addr{}
	}
	return netip.AddrFrom4(a.As4())
}
