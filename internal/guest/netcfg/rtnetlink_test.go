package netcfg

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
)

// TestAddrMsgLayout spells out, byte by byte, the request that gives an
// interface an IPv4 address: the netlink header, struct ifaddrmsg and
// the local, address and broadcast attributes, each padded to 4 bytes.
func TestAddrMsgLayout(t *testing.T) {
	ne := binary.NativeEndian
	var want []byte
	u16 := func(v uint16) { want = ne.AppendUint16(want, v) }
	u32 := func(v uint32) { want = ne.AppendUint32(want, v) }
	u32(16 + 8 + 3*8) // length
	u16(rtmNewAddr)
	u16(flagRequest | flagAck | flagCreate | flagReplace)
	u32(7) // sequence
	u32(0) // port id
	want = append(want, afInet, 24, 0, rtScopeUniverse)
	u32(3) // interface index
	for _, a := range []struct {
		typ uint16
		ip  []byte
	}{{ifaLocal, []byte{10, 83, 0, 2}}, {ifaAddress, []byte{10, 83, 0, 2}}, {ifaBroadcast, []byte{10, 83, 0, 255}}} {
		u16(8)
		u16(a.typ)
		want = append(want, a.ip...)
	}
	m := addrMsg(rtmNewAddr, 3, netip.MustParsePrefix("10.83.0.2/24"))
	if got := m.encode(7); !bytes.Equal(got, want) {
		t.Errorf("addrMsg:\n got % x\nwant % x", got, want)
	}

	// Deleting sends no broadcast; IPv6 has none either.
	if a := attrs(addrMsg(rtmDelAddr, 3, netip.MustParsePrefix("10.83.0.2/24")).body[8:]); a[ifaBroadcast] != nil || len(a) != 2 {
		t.Errorf("a delete request has attributes %v", a)
	}
	m6 := addrMsg(rtmNewAddr, 3, netip.MustParsePrefix("fd00::2/64"))
	if m6.body[0] != afInet6 || m6.body[1] != 64 || len(attrs(m6.body[8:])[ifaLocal]) != 16 {
		t.Errorf("IPv6 addrMsg body % x", m6.body)
	}
}

func TestLinkAndRouteMsgs(t *testing.T) {
	m := linkSetMsg(5, 1400)
	if m.typ != rtmNewLink || len(m.body) != 16+8 {
		t.Fatalf("linkSetMsg: type %d body % x", m.typ, m.body)
	}
	if idx, flags, change := int32(binary.NativeEndian.Uint32(m.body[4:])), binary.NativeEndian.Uint32(m.body[8:]), binary.NativeEndian.Uint32(m.body[12:]); idx != 5 || flags != iffUp || change != iffUp {
		t.Errorf("ifinfomsg: index %d flags %#x change %#x", idx, flags, change)
	}
	if mtu := attrs(m.body[16:])[iflaMTU]; binary.NativeEndian.Uint32(mtu) != 1400 {
		t.Errorf("MTU attribute % x", mtu)
	}
	if a := attrs(linkSetMsg(5, 0).body[16:]); len(a) != 0 {
		t.Errorf("an MTU of 0 is sent: %v", a)
	}

	r := defaultRouteMsg(5, netip.MustParseAddr("10.83.0.1"))
	want := []byte{afInet, 0, 0, 0, rtTableMain, rtProtStatic, rtScopeUniverse, rtnUnicast, 0, 0, 0, 0}
	if !bytes.Equal(r.body[:12], want) {
		t.Errorf("rtmsg % x, want % x", r.body[:12], want)
	}
	a := attrs(r.body[12:])
	if !bytes.Equal(a[rtaGateway], []byte{10, 83, 0, 1}) || binary.NativeEndian.Uint32(a[rtaOIF]) != 5 {
		t.Errorf("route attributes %v", a)
	}
}

func TestBroadcast(t *testing.T) {
	for p, want := range map[string]string{
		"10.83.0.2/24": "10.83.0.255", "10.84.1.9/16": "10.84.255.255", "192.168.7.5/30": "192.168.7.7", "10.0.0.1/8": "10.255.255.255",
	} {
		if got := broadcast(netip.MustParsePrefix(p)); got.String() != want {
			t.Errorf("broadcast(%s) = %v, want %s", p, got, want)
		}
	}
}

// TestAttrsMalformed: attributes the kernel would never send end the
// walk rather than read out of bounds.
func TestAttrsMalformed(t *testing.T) {
	for _, b := range [][]byte{
		{1},
		{2, 0, 1, 0},               // length below the header
		{200, 0, 1, 0, 1, 2, 3, 4}, // length beyond the buffer
		{5, 0, 3, 0, 'e'},          // a final attribute without its padding
		{8, 0, 3, 0, 'l', 'o', 0, 0, 0xff, 0xff},
	} {
		attrs(b)
	}
	if a := attrs([]byte{5, 0, 3, 0, 'e'}); string(a[3]) != "e" {
		t.Errorf("an unpadded last attribute: %q", a[3])
	}
}
