package netcfg

import (
	"encoding/binary"
	"net/netip"
)

// The rtnetlink messages netcfg sends, built as bytes with no I/O so
// that their layout can be checked on its own. Netlink speaks the host's
// byte order; every header and attribute is padded to 4 bytes.

// message is one netlink request: its type, flags and body (the fixed
// header of its family followed by attributes).
type message struct {
	typ   uint16
	flags uint16
	body  []byte
}

func align4(n int) int { return (n + 3) &^ 3 }

// attr appends a route attribute: length, type, data, padding.
func (m *message) attr(typ uint16, data []byte) {
	n := 4 + len(data)
	m.body = binary.NativeEndian.AppendUint16(m.body, uint16(n))
	m.body = binary.NativeEndian.AppendUint16(m.body, typ)
	m.body = append(m.body, data...)
	m.body = append(m.body, make([]byte, align4(n)-n)...)
}

func (m *message) attrU32(typ uint16, v uint32) {
	m.attr(typ, binary.NativeEndian.AppendUint32(nil, v))
}

// encode returns the message with its netlink header.
func (m *message) encode(seq uint32) []byte {
	const hdrLen = 16
	b := make([]byte, 0, hdrLen+len(m.body))
	b = binary.NativeEndian.AppendUint32(b, uint32(hdrLen+len(m.body)))
	b = binary.NativeEndian.AppendUint16(b, m.typ)
	b = binary.NativeEndian.AppendUint16(b, m.flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0) // the kernel fills in our port id
	return append(b, m.body...)
}

// Message types, flags and field values, from <linux/rtnetlink.h>,
// <linux/netlink.h> and <linux/if.h>; the same on every architecture.
const (
	nlmsgError = 0x2
	nlmsgDone  = 0x3

	flagRequest = 0x1
	flagMulti   = 0x2
	flagAck     = 0x4
	flagDump    = 0x300 // NLM_F_ROOT|NLM_F_MATCH
	flagReplace = 0x100
	flagCreate  = 0x400

	rtmNewLink  = 16
	rtmGetLink  = 18
	rtmNewAddr  = 20
	rtmDelAddr  = 21
	rtmGetAddr  = 22
	rtmNewRoute = 24
	rtmDelRoute = 25

	iflaAddress = 1
	iflaIfname  = 3
	iflaMTU     = 4

	ifaAddress   = 1
	ifaLocal     = 2
	ifaBroadcast = 4

	rtaOIF     = 4
	rtaGateway = 5

	iffUp = 0x1

	afUnspec = 0
	afInet   = 2
	afInet6  = 10

	rtTableMain     = 254
	rtProtStatic    = 4
	rtScopeUniverse = 0
	rtnUnicast      = 1
)

func family(a netip.Addr) uint8 {
	if a.Is4() {
		return afInet
	}
	return afInet6
}

// ifinfomsg is struct ifinfomsg: family, pad, type, index, flags, change.
func ifinfomsg(index int32, flags, change uint32) []byte {
	b := []byte{afUnspec, 0, 0, 0}
	b = binary.NativeEndian.AppendUint32(b, uint32(index))
	b = binary.NativeEndian.AppendUint32(b, flags)
	return binary.NativeEndian.AppendUint32(b, change)
}

// linkDumpMsg asks for every link.
func linkDumpMsg() message {
	return message{typ: rtmGetLink, flags: flagRequest | flagDump, body: ifinfomsg(0, 0, 0)}
}

// linkSetMsg brings a link up and, when mtu is not zero, sets its MTU.
func linkSetMsg(index int32, mtu int) message {
	m := message{typ: rtmNewLink, flags: flagRequest | flagAck, body: ifinfomsg(index, iffUp, iffUp)}
	if mtu > 0 {
		m.attrU32(iflaMTU, uint32(mtu))
	}
	return m
}

// ifaddrmsg is struct ifaddrmsg: family, prefix length, flags, scope,
// index.
func ifaddrmsg(fam uint8, bits int, scope uint8, index int32) []byte {
	b := []byte{fam, uint8(bits), 0, scope}
	return binary.NativeEndian.AppendUint32(b, uint32(index))
}

// addrDumpMsg asks for every address of a family.
func addrDumpMsg(fam uint8) message {
	return message{typ: rtmGetAddr, flags: flagRequest | flagDump, body: ifaddrmsg(fam, 0, 0, 0)}
}

// addrMsg adds (replacing one of the same address) or deletes an
// address. An IPv4 address gets its network's broadcast address, as
// `ip addr add ... brd +` gives it.
func addrMsg(typ uint16, index int32, p netip.Prefix) message {
	a := p.Addr()
	flags := uint16(flagRequest | flagAck)
	if typ == rtmNewAddr {
		flags |= flagCreate | flagReplace
	}
	m := message{typ: typ, flags: flags, body: ifaddrmsg(family(a), p.Bits(), rtScopeUniverse, index)}
	m.attr(ifaLocal, a.AsSlice())
	m.attr(ifaAddress, a.AsSlice())
	if a.Is4() && typ == rtmNewAddr && p.Bits() <= 30 {
		m.attr(ifaBroadcast, broadcast(p).AsSlice())
	}
	return m
}

// broadcast returns an IPv4 network's broadcast address.
func broadcast(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := binary.BigEndian.Uint32(b[:]) | host
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// rtmsg is struct rtmsg: family, dst_len, src_len, tos, table, protocol,
// scope, type, flags.
func rtmsg(fam uint8) []byte {
	b := []byte{fam, 0, 0, 0, rtTableMain, rtProtStatic, rtScopeUniverse, rtnUnicast}
	return binary.NativeEndian.AppendUint32(b, 0)
}

// defaultRouteMsg sets the default route of gw's family through gw on
// link index, replacing the one there was.
func defaultRouteMsg(index int32, gw netip.Addr) message {
	m := message{typ: rtmNewRoute, flags: flagRequest | flagAck | flagCreate | flagReplace, body: rtmsg(family(gw))}
	m.attr(rtaGateway, gw.AsSlice())
	m.attrU32(rtaOIF, uint32(index))
	return m
}

// delDefaultRouteMsg deletes the default route of a family.
func delDefaultRouteMsg(fam uint8) message {
	return message{typ: rtmDelRoute, flags: flagRequest | flagAck, body: rtmsg(fam)}
}

// attrs splits route attributes: type to data (the last of a type
// wins). Malformed trailing bytes end the walk.
func attrs(b []byte) map[uint16][]byte {
	out := map[uint16][]byte{}
	for len(b) >= 4 {
		n := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) & 0x3fff // without NLA_F_NESTED and NLA_F_NET_BYTEORDER
		if n < 4 || n > len(b) {
			break
		}
		out[typ] = b[4:n]
		b = b[min(align4(n), len(b)):]
	}
	return out
}
