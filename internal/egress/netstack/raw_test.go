package netstack

import (
	"context"
	"encoding/binary"
	"math/rand"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// Tests here write frames by hand on the guest's side of the wire, as a
// hostile guest with raw sockets would.

// floodPorts are the source ports of forged SYNs: below the guest
// stack's ephemeral ports (16000 and up), so that its own connections
// never use them.
const floodLo, floodHi = 1024, 9999

// silent drops what the host sends to the flood's ports before the guest
// stack sees it: the guest that forged the SYNs never answers the
// SYN-ACKs, not even with a reset.
func silent(frame []byte) bool {
	if len(frame) < header.EthernetMinimumSize+header.IPv4MinimumSize+header.TCPMinimumSize {
		return true
	}
	ip := header.IPv4(frame[header.EthernetMinimumSize:])
	if header.Ethernet(frame).Type() != header.IPv4ProtocolNumber || ip.TransportProtocol() != header.TCPProtocolNumber {
		return true
	}
	p := header.TCP(ip[ip.HeaderLength():]).DestinationPort()
	return p < floodLo || p > floodHi
}

// TestSYNFloodIsBounded: thousands of SYNs from forged ports, never
// answered, hold at most MaxPending handshakes (goroutines and memory
// stay flat), each abandoned after HandshakeTimeout; and a real
// connection gets through once the flood stops.
func TestSYNFloodIsBounded(t *testing.T) {
	const pending = 64
	var e echo
	sb := newSandbox(t, Options{
		Resolve:          allowNames("api.example.com"),
		Accept:           allowPorts("api.example.com", 443),
		Handle:           e.handle,
		MaxPending:       pending,
		HandshakeTimeout: 300 * time.Millisecond,
	}, silent)
	g := sb.guest
	addr := g.resolve(t, "api.example.com.")

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()

	const syns = 6000
	peak := 0
	for i := range syns {
		port := uint16(floodLo + i%(floodHi-floodLo+1))
		f := tcpFrame(tcpAddr(guestAddr), tcpAddr(addr), port, 443, rand.Uint32(), 0, header.TCPFlagSyn)
		if err := g.wire.writeFrame(f); err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 {
			peak = max(peak, runtime.NumGoroutine()-goroutines)
		}
	}
	time.Sleep(100 * time.Millisecond) // let the stack take the last ones
	peak = max(peak, runtime.NumGoroutine()-goroutines)
	sb.net.mu.Lock()
	inFlight := len(sb.net.pending)
	sb.net.mu.Unlock()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if inFlight > pending {
		t.Errorf("%d handshakes under way, bound %d", inFlight, pending)
	}
	// Each handshake holds a goroutine and a timer goroutine at most.
	if peak > 2*pending+32 {
		t.Errorf("%d goroutines more during the flood, want at most %d", peak, 2*pending+32)
	}
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 32<<20 {
		t.Errorf("heap grew %d MiB during the flood", grew>>20)
	}
	if _, syn := sb.net.Dropped(); syn == 0 {
		t.Error("no SYN dropped over MaxPending")
	}
	if n := len(sb.net.Flows()); n != 0 {
		t.Errorf("%d flows from SYNs never acknowledged", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	c, err := g.dial(ctx, addr, 443)
	if err != nil {
		t.Fatalf("a real connection after the flood: %v", err)
	}
	c.Close()
	t.Logf("a real connection %v after the flood; %d more goroutines at the peak, %d SYNs dropped",
		time.Since(start).Round(time.Millisecond), peak, func() uint64 { _, s := sb.net.Dropped(); return s }())
}

// ipFrame builds an Ethernet frame holding an IPv4 packet with payload
// (its transport header and data, checksums the caller's), from src to
// dst.
func ipFrame(src, dst netip.Addr, proto tcpip.TransportProtocolNumber, payload []byte, mod func(header.IPv4)) []byte {
	b := make([]byte, header.EthernetMinimumSize+header.IPv4MinimumSize+len(payload))
	header.Ethernet(b).Encode(&header.EthernetFields{
		SrcAddr: tcpip.LinkAddress(guestMAC),
		DstAddr: tcpip.LinkAddress(gatewayMAC),
		Type:    header.IPv4ProtocolNumber,
	})
	ip := header.IPv4(b[header.EthernetMinimumSize:])
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(header.IPv4MinimumSize + len(payload)),
		TTL:         64,
		Protocol:    uint8(proto),
		SrcAddr:     tcpAddr(src),
		DstAddr:     tcpAddr(dst),
	})
	copy(ip[header.IPv4MinimumSize:], payload)
	if mod != nil {
		mod(ip)
	}
	ip.SetChecksum(0)
	ip.SetChecksum(^ip.CalculateChecksum())
	return b
}

func icmpEcho(id uint16) []byte {
	m := header.ICMPv4(make([]byte, header.ICMPv4MinimumSize+8))
	m.SetType(header.ICMPv4Echo)
	m.SetIdent(id)
	m.SetSequence(1)
	copy(m.Payload(), "sbx-ping")
	m.SetChecksum(^checksum.Checksum(m, 0))
	return m
}

// capture records the frames the guest's stack receives.
type capture struct {
	mu     sync.Mutex
	frames [][]byte
}

func (c *capture) admit(frame []byte) bool {
	c.mu.Lock()
	c.frames = append(c.frames, append([]byte(nil), frame...))
	c.mu.Unlock()
	return true
}

// echoReplies returns the ICMP echo replies with id received so far, by
// source.
func (c *capture) echoReplies(id uint16) []netip.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	var from []netip.Addr
	for _, f := range c.frames {
		if header.Ethernet(f).Type() != header.IPv4ProtocolNumber {
			continue
		}
		ip := header.IPv4(f[header.EthernetMinimumSize:])
		if ip.TransportProtocol() != header.ICMPv4ProtocolNumber {
			continue
		}
		m := header.ICMPv4(ip.Payload())
		if m.Type() == header.ICMPv4EchoReply && m.Ident() == id {
			from = append(from, netAddr(ip.SourceAddress()))
		}
	}
	return from
}

func TestICMPOnlyTheGatewayAnswers(t *testing.T) {
	var cap capture
	sb := newSandbox(t, Options{Resolve: allowNames("api.example.com")}, cap.admit)
	g := sb.guest
	addr := g.resolve(t, "api.example.com.")
	others := []netip.Addr{netip.MustParseAddr("8.8.8.8"), addr, netip.MustParseAddr("169.254.169.254")}
	for i, dst := range append([]netip.Addr{gatewayAddr}, others...) {
		if err := g.wire.writeFrame(ipFrame(guestAddr, dst, header.ICMPv4ProtocolNumber, icmpEcho(uint16(100+i)), nil)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for len(cap.echoReplies(100)) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if from := cap.echoReplies(100); len(from) != 1 || from[0] != gatewayAddr {
		t.Errorf("echo to the gateway answered by %v", from)
	}
	for i, dst := range others {
		if from := cap.echoReplies(uint16(101 + i)); len(from) != 0 {
			t.Errorf("echo to %v answered by %v", dst, from)
		}
		sb.waitDenial(t, func(d Denial) bool {
			return d.Proto == "ip" && d.Dst.Addr() == dst && strings.Contains(d.Reason, "ICMP")
		})
	}
}

// TestForgedAndOddPacketsRefused: a SYN from another source address, a
// fragment, and an IP protocol the network does not carry are dropped
// and reported; none becomes a flow.
func TestForgedAndOddPacketsRefused(t *testing.T) {
	var e echo
	sb := newSandbox(t, Options{
		Resolve: allowNames("api.example.com"),
		Accept:  allowPorts("api.example.com", 443),
		Handle:  e.handle,
	}, nil)
	g := sb.guest
	addr := g.resolve(t, "api.example.com.")
	syn := func(src netip.Addr) []byte {
		return tcpFrame(tcpAddr(src), tcpAddr(addr), 4242, 443, 1000, 0, header.TCPFlagSyn)
	}
	forged := netip.MustParseAddr("10.83.0.99")
	if err := g.wire.writeFrame(syn(forged)); err != nil {
		t.Fatal(err)
	}
	sb.waitDenial(t, func(d Denial) bool {
		return d.Proto == "ip" && strings.Contains(d.Reason, "source address 10.83.0.99")
	})

	frag := syn(guestAddr)
	ip := header.IPv4(frag[header.EthernetMinimumSize:])
	ip.SetFlagsFragmentOffset(header.IPv4FlagMoreFragments, 0)
	ip.SetChecksum(0)
	ip.SetChecksum(^ip.CalculateChecksum())
	if err := g.wire.writeFrame(frag); err != nil {
		t.Fatal(err)
	}
	sb.waitDenial(t, func(d Denial) bool { return d.Proto == "ip" && strings.Contains(d.Reason, "fragment") })

	gre := ipFrame(guestAddr, addr, 47, make([]byte, 8), nil)
	if err := g.wire.writeFrame(gre); err != nil {
		t.Fatal(err)
	}
	sb.waitDenial(t, func(d Denial) bool { return d.Proto == "ip" && strings.Contains(d.Reason, "protocol 47") })
	time.Sleep(50 * time.Millisecond)
	if fl := sb.net.Flows(); len(fl) != 0 {
		t.Errorf("flows %+v", fl)
	}
}

// TestMalformedFramesDoNotHurt writes frames cut short or lying about
// their lengths, and random bytes, and checks the network still serves.
func TestMalformedFramesDoNotHurt(t *testing.T) {
	sb := newSandbox(t, Options{Resolve: allowNames("api.example.com")}, nil)
	g := sb.guest
	addr := g.resolve(t, "api.example.com.")
	full := tcpFrame(tcpAddr(guestAddr), tcpAddr(addr), 4242, 443, 1, 0, header.TCPFlagSyn)
	udp := ipFrame(guestAddr, gatewayAddr, header.UDPProtocolNumber, make([]byte, header.UDPMinimumSize+5), func(ip header.IPv4) {
		u := header.UDP(ip.Payload())
		u.SetSourcePort(3333)
		u.SetDestinationPort(53)
		u.SetLength(0xffff) // longer than the packet
	})
	var frames [][]byte
	frames = append(frames, nil, []byte{0}, full[:13], full[:14], full[:14+10], full[:14+20], full[:14+20+5])
	for _, mod := range []func(header.IPv4){
		func(ip header.IPv4) { ip[0] = 0x4f },                                  // IHL past the packet
		func(ip header.IPv4) { ip[0] = 0x41 },                                  // IHL under the minimum
		func(ip header.IPv4) { binary.BigEndian.PutUint16(ip[2:], 0xffff) },    // total length past the frame
		func(ip header.IPv4) { binary.BigEndian.PutUint16(ip[2:], 10) },        // total length under the header
		func(ip header.IPv4) { ip[0] = 0x65 },                                  // version 6 in an IPv4 frame
		func(ip header.IPv4) { header.TCP(ip[20:]).SetDataOffset(60) },         // TCP options past the segment
		func(ip header.IPv4) { header.TCP(ip[20:]).SetDataOffset(4) },          // TCP header under its minimum
		func(ip header.IPv4) { ip.SetChecksum(ip.Checksum() + 1) },             // bad IP checksum
		func(ip header.IPv4) { header.TCP(ip[20:]).SetChecksum(1) },            // bad TCP checksum
		func(ip header.IPv4) { ip.SetTotalLength(header.IPv4MinimumSize + 8) }, // TCP header cut by the IP length
	} {
		f := append([]byte(nil), full...)
		mod(header.IPv4(f[header.EthernetMinimumSize:]))
		frames = append(frames, f)
	}
	frames = append(frames, udp, udp[:len(udp)-3])
	arp := make([]byte, 14+10)
	header.Ethernet(arp).Encode(&header.EthernetFields{DstAddr: tcpip.LinkAddress(gatewayMAC), SrcAddr: tcpip.LinkAddress(guestMAC), Type: header.ARPProtocolNumber})
	frames = append(frames, arp)
	rng := rand.New(rand.NewSource(1))
	for range 3000 {
		f := make([]byte, rng.Intn(200))
		rng.Read(f)
		if len(f) >= 14 && rng.Intn(2) == 0 {
			// Mostly well-typed IPv4 to get past the first checks.
			header.Ethernet(f).Encode(&header.EthernetFields{DstAddr: tcpip.LinkAddress(gatewayMAC), SrcAddr: tcpip.LinkAddress(guestMAC), Type: header.IPv4ProtocolNumber})
			if len(f) >= 34 {
				f[14] = 0x45
				copy(f[26:30], guestAddr.AsSlice())
			}
		}
		frames = append(frames, f)
	}
	for _, f := range frames {
		if err := g.wire.writeFrame(f); err != nil {
			t.Fatal(err)
		}
	}
	if got := g.resolve(t, "api.example.com."); got != addr {
		t.Errorf("after the garbage, api.example.com is %v, was %v", got, addr)
	}
	select {
	case err := <-sb.served:
		t.Fatalf("Serve returned %v", err)
	default:
	}
	if st := sb.net.Stats(); st.Frames < uint64(len(frames)) {
		t.Errorf("Stats counted %d frames, the test wrote %d and more", st.Frames, len(frames))
	}
}

// arpFrame is an ARP message from the guest's Ethernet address claiming
// sender is at it.
func arpFrame(op header.ARPOp, sender, target netip.Addr) []byte {
	b := make([]byte, header.EthernetMinimumSize+header.ARPSize)
	header.Ethernet(b).Encode(&header.EthernetFields{
		SrcAddr: tcpip.LinkAddress(guestMAC),
		DstAddr: header.EthernetBroadcastAddress,
		Type:    header.ARPProtocolNumber,
	})
	a := header.ARP(b[header.EthernetMinimumSize:])
	a.SetIPv4OverEthernet()
	a.SetOp(op)
	copy(a.HardwareAddressSender(), guestMAC)
	copy(a.ProtocolAddressSender(), sender.AsSlice())
	copy(a.ProtocolAddressTarget(), target.AsSlice())
	return b
}

// TestARPFromOthersIgnored: ARP claiming the gateway's address, or any
// address but the guest's, never reaches the stack, and the network goes
// on serving.
func TestARPFromOthersIgnored(t *testing.T) {
	var cap capture
	sb := newSandbox(t, Options{Resolve: allowNames("api.example.com")}, cap.admit)
	g := sb.guest
	addr := g.resolve(t, "api.example.com.")
	cap.mu.Lock()
	cap.frames = nil
	cap.mu.Unlock()
	for i := range 600 {
		forged := netip.AddrFrom4([4]byte{10, 83, 0, byte(3 + i%250)})
		for _, f := range [][]byte{
			arpFrame(header.ARPReply, gatewayAddr, gatewayAddr), // gratuitous: the gateway is here
			arpFrame(header.ARPRequest, forged, gatewayAddr),
			arpFrame(header.ARPRequest, netip.AddrFrom4([4]byte{8, 8, byte(i >> 8), byte(i)}), gatewayAddr),
		} {
			if err := g.wire.writeFrame(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := g.resolve(t, "api.example.com."); got != addr {
		t.Errorf("after the ARP, api.example.com is %v, was %v", got, addr)
	}
	cap.mu.Lock()
	defer cap.mu.Unlock()
	for _, f := range cap.frames {
		if header.Ethernet(f).Type() != header.ARPProtocolNumber {
			continue
		}
		a := header.ARP(f[header.EthernetMinimumSize:])
		if a.Op() == header.ARPReply && netip.AddrFrom4([4]byte(a.ProtocolAddressTarget())) != guestAddr {
			t.Fatalf("the gateway answered ARP from %v", netip.AddrFrom4([4]byte(a.ProtocolAddressTarget())))
		}
	}
}
