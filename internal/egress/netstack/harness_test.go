package netstack

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"

	"github.com/sbx-dev/sbx/internal/socketpair"
)

var guestMAC = net.HardwareAddr{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}

// guest is a second gVisor stack playing the sandbox's kernel, configured
// as GuestConfig says, on the other end of a socket pair whose first end
// the Network serves.
type guest struct {
	stk  *stack.Stack
	wire *wire
}

// sandbox is a Network serving one guest.
type sandbox struct {
	net    *Network
	guest  *guest
	served chan error // what Serve returned
	cancel context.CancelFunc

	mu      sync.Mutex
	denials []Denial
}

// newSandbox starts a Network with opts (its Deny recorded) serving a
// fresh guest stack; both are torn down when the test ends. guestAdmit,
// if not nil, filters the frames the guest's stack receives.
func newSandbox(t testing.TB, opts Options, guestAdmit func([]byte) bool) *sandbox {
	t.Helper()
	sb := &sandbox{served: make(chan error, 1)}
	deny := opts.Deny
	opts.Deny = func(d Denial) {
		sb.mu.Lock()
		sb.denials = append(sb.denials, d)
		sb.mu.Unlock()
		if deny != nil {
			deny(d)
		}
	}
	n, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	sb.net = n
	host, gconn := socketpair.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	sb.cancel = cancel
	go func() { sb.served <- n.Serve(ctx, host) }()
	sb.guest = newGuest(t, gconn, n.GuestConfig(), guestAdmit)
	t.Cleanup(func() {
		cancel()
		select {
		case <-sb.served:
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return within 5s of its context ending")
		}
	})
	return sb
}

func newGuest(t testing.TB, conn net.Conn, cfg GuestConfig, admit func([]byte) bool) *guest {
	t.Helper()
	s := stack.New(stack.Options{
		// A Linux guest keeps 127.0.0.0/8 to itself, but a hostile one can
		// put anything on the wire; this stack lets the test do so, and
		// take the reset back.
		NetworkProtocols: []stack.NetworkProtocolFactory{
			ipv4.NewProtocolWithOptions(ipv4.Options{AllowExternalLoopbackTraffic: true}),
			arp.NewProtocol,
		},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	ch := channel.New(512, uint32(cfg.MTU), tcpip.LinkAddress(guestMAC))
	if err := s.CreateNIC(1, ethernet.New(ch)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddProtocolAddress(1, tcpip.ProtocolAddress{
		Protocol:          ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpAddr(cfg.Addr.Addr()), PrefixLen: cfg.Addr.Bits()},
	}, stack.AddressProperties{}); err != nil {
		t.Fatal(err)
	}
	subnet, _ := tcpip.NewSubnet(tcpAddr(cfg.Addr.Masked().Addr()), tcpip.MaskFromBytes(net.CIDRMask(cfg.Addr.Bits(), 32)))
	s.SetRouteTable([]tcpip.Route{
		{Destination: subnet, NIC: 1},
		{Destination: header0, Gateway: tcpAddr(cfg.Gateway), NIC: 1},
	})
	w := newWire(conn, ch)
	w.admit = admit
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		s.Destroy()
	})
	return &guest{stk: s, wire: w}
}

var header0, _ = tcpip.NewSubnet(tcpip.AddrFrom4([4]byte{}), tcpip.MaskFromBytes(make([]byte, 4)))

// query asks the sandbox's DNS server over UDP.
func (g *guest) query(t testing.TB, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m, err := g.exchange(name, qtype, 2*time.Second)
	if err != nil {
		t.Fatalf("DNS %s %s: %v", dns.Type(qtype), name, err)
	}
	return m
}

func (g *guest) exchange(name string, qtype uint16, wait time.Duration) (*dns.Msg, error) {
	c, err := gonet.DialUDP(g.stk, nil, &tcpip.FullAddress{NIC: 1, Addr: tcpAddr(gatewayAddr), Port: 53}, ipv4.ProtocolNumber)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	co := &dns.Conn{Conn: c}
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	if err := co.WriteMsg(q); err != nil {
		return nil, err
	}
	r, err := co.ReadMsg()
	if err != nil {
		return nil, err
	}
	if r.Id != q.Id {
		return nil, errors.New("reply to another query")
	}
	return r, nil
}

// resolve returns name's A answer, failing the test if there is none.
func (g *guest) resolve(t testing.TB, name string) netip.Addr {
	t.Helper()
	r := g.query(t, name, dns.TypeA)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("A %s: rcode %s, %d answers; want one", name, dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	a, ok := r.Answer[0].(*dns.A)
	if !ok {
		t.Fatalf("A %s: answer %v", name, r.Answer[0])
	}
	addr, _ := netip.AddrFromSlice(a.A.To4())
	return addr
}

// dial connects from the guest to addr:port.
func (g *guest) dial(ctx context.Context, addr netip.Addr, port uint16) (*gonet.TCPConn, error) {
	return gonet.DialContextTCP(ctx, g.stk, tcpip.FullAddress{NIC: 1, Addr: tcpAddr(addr), Port: port}, ipv4.ProtocolNumber)
}

// waitDenial waits up to 3s for a Denial match accepts.
func (sb *sandbox) waitDenial(t testing.TB, match func(Denial) bool) Denial {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		sb.mu.Lock()
		for _, d := range sb.denials {
			if match(d) {
				sb.mu.Unlock()
				return d
			}
		}
		all := append([]Denial(nil), sb.denials...)
		sb.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no such denial within 3s; have %+v", all)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
