package netstack

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
)

// DNS bounds beyond Options.DNSRate.
const (
	// dnsTTL is the TTL of every answer. A name's address never changes
	// for the life of the Network, but policy can: a short TTL keeps the
	// guest asking, so that a name the policy dropped gets NXDOMAIN soon.
	dnsTTL = 30
	// dnsTCPConns bounds DNS-over-TCP connections served at once.
	dnsTCPConns = 8
	// dnsTCPQueries bounds the queries one DNS-over-TCP connection asks.
	dnsTCPQueries = 64
	// dnsTCPIdle is how long a DNS-over-TCP connection may sit between
	// queries.
	dnsTCPIdle = 10 * time.Second
)

var dnsAddr = netip.AddrPortFrom(gatewayAddr, 53)

// answer returns the reply to one DNS message, or nil to send none.
//
// The rules: a message that does not parse gets FORMERR if it has a
// header to answer and nothing otherwise; a response gets nothing (so no
// loop can form); an opcode other than QUERY gets NOTIMP; anything but
// exactly one question gets FORMERR; a class other than IN, and any type
// but A and AAAA, get REFUSED; A and AAAA for a name Resolve refuses (or
// one no policy could name) get NXDOMAIN; A for a name Resolve allows
// gets the name's synthetic address, SERVFAIL if the table is full; AAAA
// for it gets an empty NOERROR (the name exists, but not over IPv6), so
// that resolvers go on to use the A answer. Nothing is ever asked
// upstream. Every refusal but the unparsable is reported as a Denial.
func (n *Network) answer(req []byte) []byte {
	var q dns.Msg
	if err := q.Unpack(req); err != nil {
		if len(req) < 12 || req[2]&0x80 != 0 {
			return nil
		}
		r := new(dns.Msg)
		r.Id = binary.BigEndian.Uint16(req)
		r.Response = true
		r.Rcode = dns.RcodeFormatError
		return pack(r)
	}
	if q.Response {
		return nil
	}
	r := new(dns.Msg)
	r.SetReply(&q)
	r.RecursionAvailable = true
	r.Authoritative = true
	if q.Opcode != dns.OpcodeQuery {
		r.Rcode = dns.RcodeNotImplemented
		n.deny("dns", "", dnsAddr, "DNS opcode "+dns.OpcodeToString[q.Opcode]+" is not answered")
		return pack(r)
	}
	if len(q.Question) != 1 {
		r.Rcode = dns.RcodeFormatError
		return pack(r)
	}
	qq := q.Question[0]
	name, ok := canonicalName(qq.Name)
	if qq.Qclass != dns.ClassINET || (qq.Qtype != dns.TypeA && qq.Qtype != dns.TypeAAAA) {
		r.Rcode = dns.RcodeRefused
		n.deny("dns", name, dnsAddr, "DNS query type "+dns.Type(qq.Qtype).String()+
			" class "+dns.Class(qq.Qclass).String()+" is refused: only A and AAAA are answered")
		return pack(r)
	}
	if !ok || n.opts.Resolve == nil || !n.opts.Resolve(name) {
		r.Rcode = dns.RcodeNameError
		if !ok {
			name = qq.Name
		}
		n.deny("dns", name, dnsAddr, "name not allowed by the egress policy")
		return pack(r)
	}
	if qq.Qtype == dns.TypeAAAA {
		return pack(r)
	}
	addr, ok := n.names.addr(name)
	if !ok {
		r.Rcode = dns.RcodeServerFailure
		n.deny("dns", name, dnsAddr, "the sandbox has given out all its addresses")
		return pack(r)
	}
	r.Answer = []dns.RR{&dns.A{
		Hdr: dns.RR_Header{Name: qq.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: dnsTTL},
		A:   net.IP(addr.AsSlice()),
	}}
	return pack(r)
}

func pack(m *dns.Msg) []byte {
	b, err := m.Pack()
	if err != nil {
		return nil
	}
	return b
}

// allowQuery takes a DNS query from the rate; over it the query is
// dropped and reported.
func (n *Network) allowQuery() bool {
	if n.dns.take(time.Now()) {
		return true
	}
	n.deny("dns", "", dnsAddr, "over the sandbox's DNS query rate")
	return false
}

// startDNS opens the gateway's DNS sockets, UDP and TCP port 53, and
// serves them in goroutines counted in wg. The returned function closes
// them.
func (n *Network) startDNS(wg *sync.WaitGroup) (func(), error) {
	local := tcpip.FullAddress{NIC: nicID, Addr: tcpAddr(gatewayAddr), Port: 53}
	uc, err := gonet.DialUDP(n.stk, &local, nil, ipv4.ProtocolNumber)
	if err != nil {
		return nil, err
	}
	ln, err := gonet.ListenTCP(n.stk, local, ipv4.ProtocolNumber)
	if err != nil {
		uc.Close()
		return nil, err
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		n.serveDNSUDP(uc)
	}()
	go func() {
		defer wg.Done()
		n.serveDNSTCP(ln, wg)
	}()
	return func() { uc.Close(); ln.Close() }, nil
}

func (n *Network) serveDNSUDP(c *gonet.UDPConn) {
	buf := make([]byte, 4096)
	for {
		k, from, err := c.ReadFrom(buf)
		if err != nil {
			return
		}
		if !n.allowQuery() {
			continue
		}
		if resp := n.answer(buf[:k]); resp != nil {
			c.WriteTo(resp, from)
		}
	}
}

func (n *Network) serveDNSTCP(ln *gonet.TCPListener, wg *sync.WaitGroup) {
	sem := make(chan struct{}, dnsTCPConns)
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		select {
		case sem <- struct{}{}:
		default:
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			defer c.Close()
			n.serveDNSConn(c)
		}()
	}
}

// serveDNSConn answers the length-prefixed queries of one DNS-over-TCP
// connection.
func (n *Network) serveDNSConn(c net.Conn) {
	var hdr [2]byte
	buf := make([]byte, 1<<16)
	for range dnsTCPQueries {
		c.SetDeadline(time.Now().Add(dnsTCPIdle))
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		size := binary.BigEndian.Uint16(hdr[:])
		if _, err := io.ReadFull(c, buf[:size]); err != nil {
			return
		}
		if !n.allowQuery() {
			return
		}
		resp := n.answer(buf[:size])
		if resp == nil {
			return
		}
		out := make([]byte, 2+len(resp))
		binary.BigEndian.PutUint16(out, uint16(len(resp)))
		copy(out[2:], resp)
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}
