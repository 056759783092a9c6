package netstack

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// tcpUnknown sees every TCP segment no endpoint of the stack's takes. A
// SYN starts a handshake through the forwarder, if fewer than MaxPending
// are under way (a retransmitted SYN for one under way is dropped);
// anything else is the stack's to answer, with a reset.
func (n *Network) tcpUnknown(id stack.TransportEndpointID, pkt *stack.PacketBuffer) bool {
	th := header.TCP(pkt.TransportHeader().Slice())
	if len(th) < header.TCPMinimumSize {
		return false
	}
	if f := th.Flags(); !f.Contains(header.TCPFlagSyn) || f.Contains(header.TCPFlagAck) {
		return false
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return true
	}
	if _, ok := n.pending[id]; ok {
		n.mu.Unlock()
		return true
	}
	if len(n.pending) >= n.opts.MaxPending {
		n.mu.Unlock()
		n.synDropped.Add(1)
		return true
	}
	n.pending[id] = th.SequenceNumber()
	n.mu.Unlock()
	if !n.fwd.HandlePacket(id, pkt) {
		n.unpend(id)
		return false
	}
	return true
}

func (n *Network) unpend(id stack.TransportEndpointID) {
	n.mu.Lock()
	delete(n.pending, id)
	n.mu.Unlock()
}

// handleSYN decides a SYN the forwarder hands over, in a goroutine of its
// own: a reset, or a handshake and a flow for Options.Handle.
func (n *Network) handleSYN(r *tcp.ForwarderRequest) {
	id := r.ID()
	defer n.unpend(id)
	dst := netip.AddrPortFrom(netAddr(id.LocalAddress), id.LocalPort)
	src := netip.AddrPortFrom(netAddr(id.RemoteAddress), id.RemotePort)
	name, reason := n.decideTCP(dst)
	if reason == "" && !n.reserve() {
		reason = fmt.Sprintf("over the sandbox's %d open connections", n.opts.MaxConns)
	}
	if reason != "" {
		r.Complete(true)
		n.deny("tcp", name, dst, reason)
		return
	}

	var wq waiter.Queue
	n.mu.Lock()
	seq := n.pending[id]
	n.mu.Unlock()
	abandon := time.AfterFunc(n.opts.HandshakeTimeout, func() { n.resetHandshake(id, seq) })
	ep, err := r.CreateEndpoint(&wq)
	abandon.Stop()
	r.Complete(false)
	if err != nil {
		n.unreserve()
		return
	}
	ctx, cancel := context.WithCancel(n.ctx)
	fl := &flow{
		ep:     ep,
		conn:   gonet.NewTCPConn(&wq, ep),
		cancel: cancel,
		f:      Flow{Name: name, Port: dst.Port(), Src: src, Dst: dst},
	}
	n.mu.Lock()
	n.reserved--
	if n.closed {
		n.mu.Unlock()
		fl.close()
		return
	}
	n.nextID++
	fl.f.ID = n.nextID
	n.flows[fl.f.ID] = fl
	n.mu.Unlock()
	// The policy may have changed during the handshake, and CloseFlows
	// been called before the flow was listed: ask again now that it is.
	// Either this sees the new policy, or the flow was listed before the
	// policy changed and so before CloseFlows looked.
	if !n.opts.Accept(name, dst.Port()) {
		n.mu.Lock()
		delete(n.flows, fl.f.ID)
		n.mu.Unlock()
		fl.close()
		n.deny("tcp", name, dst, fmt.Sprintf("port %d of %s stopped being allowed during the handshake", dst.Port(), name))
		return
	}

	go func() {
		defer func() {
			n.mu.Lock()
			if n.flows[fl.f.ID] == fl {
				delete(n.flows, fl.f.ID)
			}
			n.mu.Unlock()
			cancel()
			fl.conn.Close()
		}()
		if n.opts.Handle != nil {
			n.opts.Handle(ctx, fl.f, fl.conn)
		}
	}()
}

// decideTCP returns the name behind dst, and why a connection to it is
// refused ("" if it is not). Only a synthetic address DNS gave out leads
// anywhere, and only to a port Accept allows for its name.
func (n *Network) decideTCP(dst netip.AddrPort) (name, reason string) {
	a := dst.Addr()
	name, ok := n.names.name(a)
	switch {
	case ok:
	case a == gatewayAddr:
		return "", fmt.Sprintf("the gateway serves only DNS (port 53), not port %d", dst.Port())
	case synthetic.Contains(a):
		return "", "address not given out by the sandbox's DNS"
	case a.IsLoopback():
		return "", "loopback address"
	case a.IsLinkLocalUnicast():
		return "", "link-local address (cloud metadata lives there)"
	case a.IsPrivate(), a.IsUnspecified():
		return "", "private address"
	default:
		return "", "IP address not given out by the sandbox's DNS: connect by name"
	}
	if n.opts.Accept == nil || !n.opts.Accept(name, dst.Port()) {
		return name, fmt.Sprintf("port %d of %s is not allowed by the egress policy", dst.Port(), name)
	}
	return name, ""
}

// reserve counts a handshake toward MaxConns; false if there is no room.
func (n *Network) reserve() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || len(n.flows)+n.reserved >= n.opts.MaxConns {
		return false
	}
	n.reserved++
	return true
}

func (n *Network) unreserve() {
	n.mu.Lock()
	n.reserved--
	n.mu.Unlock()
}

// resetHandshake abandons a handshake the guest has not finished in time
// by handing the stack a reset from the guest, the only way to end a
// forwarder's handshake before its own minute of SYN-ACK retries: the
// slot it held goes back to MaxPending. Should the guest's ACK arrive
// just as the timer fires, the reset may end the new connection instead
// (its sequence number is still the one expected): the guest sees a
// reset and can retry, and the race needs a guest that took
// HandshakeTimeout to answer.
func (n *Network) resetHandshake(id stack.TransportEndpointID, synSeq uint32) {
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return // the stack is gone, and its handshakes with it
	}
	frame := tcpFrame(id.RemoteAddress, id.LocalAddress, id.RemotePort, id.LocalPort,
		synSeq+1, 0, header.TCPFlagRst)
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	n.ch.InjectInbound(0, pkt)
	pkt.DecRef()
}

// tcpFrame builds an Ethernet frame holding an IPv4 TCP segment with no
// payload or options, checksums filled in, from src to dst (the gateway's
// Ethernet address).
func tcpFrame(src, dst tcpip.Address, sport, dport uint16, seq, ack uint32, flags header.TCPFlags) []byte {
	const ipLen = header.IPv4MinimumSize + header.TCPMinimumSize
	b := make([]byte, header.EthernetMinimumSize+ipLen)
	header.Ethernet(b).Encode(&header.EthernetFields{
		SrcAddr: tcpip.LinkAddress([]byte{0x02, 0x83, 0, 0, 0, 2}),
		DstAddr: tcpip.LinkAddress(gatewayMAC),
		Type:    header.IPv4ProtocolNumber,
	})
	ip := header.IPv4(b[header.EthernetMinimumSize:])
	ip.Encode(&header.IPv4Fields{
		TotalLength: ipLen,
		TTL:         64,
		Protocol:    uint8(header.TCPProtocolNumber),
		SrcAddr:     src,
		DstAddr:     dst,
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	t := header.TCP(ip[header.IPv4MinimumSize:])
	t.Encode(&header.TCPFields{
		SrcPort:    sport,
		DstPort:    dport,
		SeqNum:     seq,
		AckNum:     ack,
		DataOffset: header.TCPMinimumSize,
		Flags:      flags,
		WindowSize: 65535,
	})
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, src, dst, header.TCPMinimumSize)
	t.SetChecksum(^checksum.Combine(xsum, checksum.Checksum(t, 0)))
	return b
}
