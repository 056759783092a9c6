package netstack

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"

	"github.com/sbx-dev/sbx/internal/proto/netstream"
	"github.com/sbx-dev/sbx/internal/socketpair"
)

func TestDNSOverTCP(t *testing.T) {
	sb := newSandbox(t, Options{Resolve: allowNames("api.example.com")}, nil)
	g := sb.guest
	udpAddr := g.resolve(t, "api.example.com.")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := gonet.DialContextTCP(ctx, g.stk, tcpip.FullAddress{NIC: 1, Addr: tcpAddr(gatewayAddr), Port: 53}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	co := &dns.Conn{Conn: c}
	for _, c := range []struct {
		name  string
		qtype uint16
		rcode int
	}{
		{"api.example.com.", dns.TypeA, dns.RcodeSuccess},
		{"evil.example.net.", dns.TypeA, dns.RcodeNameError},
		{"api.example.com.", dns.TypeTXT, dns.RcodeRefused},
	} {
		q := new(dns.Msg)
		q.SetQuestion(c.name, c.qtype)
		if err := co.WriteMsg(q); err != nil {
			t.Fatal(err)
		}
		r, err := co.ReadMsg()
		if err != nil {
			t.Fatal(err)
		}
		if r.Id != q.Id || r.Rcode != c.rcode {
			t.Errorf("%s %s over TCP: rcode %s", dns.Type(c.qtype), c.name, dns.RcodeToString[r.Rcode])
		}
		if c.rcode == dns.RcodeSuccess {
			if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != udpAddr.String() {
				t.Errorf("over TCP %v; over UDP %v", r.Answer, udpAddr)
			}
		}
	}
	// A message too short to have a header ends the connection without
	// an answer; one with a header but garbage after gets FORMERR.
	garbage := []byte{0, 14, 0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0xff, 0xff}
	if _, err := c.Write(garbage); err != nil {
		t.Fatal(err)
	}
	r, err := co.ReadMsg()
	if err != nil {
		t.Fatal(err)
	}
	if r.Id != 0xabcd || r.Rcode != dns.RcodeFormatError {
		t.Errorf("garbage got id %#x rcode %s; want FORMERR", r.Id, dns.RcodeToString[r.Rcode])
	}
}

func TestDNSRateBounded(t *testing.T) {
	sb := newSandbox(t, Options{Resolve: allowNames("api.example.com"), DNSRate: 5}, nil)
	g := sb.guest
	answered := 0
	start := time.Now()
	for range 20 {
		if _, err := g.exchange("api.example.com.", dns.TypeA, 100*time.Millisecond); err == nil {
			answered++
		}
	}
	// The burst of 5, then 5 a second for as long as the dropped
	// queries took to time out.
	most := 5 + int(5*time.Since(start).Seconds()) + 1
	if answered < 5 || answered > most {
		t.Errorf("%d of 20 queries in %v answered with a rate of 5/s; want 5 to %d", answered, time.Since(start), most)
	}
	sb.waitDenial(t, func(d Denial) bool { return d.Proto == "dns" && d.Reason == "over the sandbox's DNS query rate" })
}

func TestDNSNameTableBounded(t *testing.T) {
	sb := newSandbox(t, Options{Resolve: func(string) bool { return true }, MaxNames: 3}, nil)
	g := sb.guest
	for _, n := range []string{"a.example.", "b.example.", "c.example."} {
		g.resolve(t, n)
	}
	if r := g.query(t, "d.example.", dns.TypeA); r.Rcode != dns.RcodeServerFailure || len(r.Answer) != 0 {
		t.Errorf("fourth name with MaxNames 3: rcode %s, %d answers", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	g.resolve(t, "b.example.") // names already given keep theirs
}

func TestServeEndsWithItsContextAndClosesFlows(t *testing.T) {
	handleCtx := make(chan context.Context, 1)
	sb := newSandbox(t, Options{
		Resolve: allowNames("api.example.com"),
		Accept:  func(string, uint16) bool { return true },
		Handle: func(ctx context.Context, f Flow, conn net.Conn) {
			handleCtx <- ctx
			io.Copy(io.Discard, conn)
		},
	}, nil)
	g := sb.guest
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := g.dial(ctx, g.resolve(t, "api.example.com."), 443)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hctx := <-handleCtx
	sb.cancel()
	select {
	case err := <-sb.served:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Serve returned %v, want context.Canceled", err)
		}
		sb.served <- err // for the cleanup
	case <-time.After(3 * time.Second):
		t.Fatal("Serve did not return within 3s of its context ending")
	}
	select {
	case <-hctx.Done():
	case <-time.After(time.Second):
		t.Error("Handle's context not done after Serve returned")
	}
	if fl := sb.net.Flows(); len(fl) != 0 {
		t.Errorf("flows after Serve: %+v", fl)
	}
	if err := sb.net.Serve(context.Background(), nil); err == nil {
		t.Error("a second Serve succeeded")
	}
}

func TestServeEndsWithItsConnection(t *testing.T) {
	n, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	host, guest := socketpair.New(t)
	done := make(chan error, 1)
	go func() { done <- n.Serve(context.Background(), host) }()
	guest.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve returned %v when its peer closed, want nil", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Serve did not return within 3s of its peer closing")
	}
}

func TestServeFailsOnBrokenFraming(t *testing.T) {
	n, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	host, guest := socketpair.New(t)
	done := make(chan error, 1)
	go func() { done <- n.Serve(context.Background(), host) }()
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], netstream.MaxFrame+1)
	guest.Write(hdr[:])
	select {
	case err := <-done:
		if !errors.Is(err, netstream.ErrFrameTooLong) {
			t.Errorf("Serve returned %v, want ErrFrameTooLong", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Serve did not return within 3s of a broken frame")
	}
}

func TestNewRejectsNegativeBounds(t *testing.T) {
	for _, o := range []Options{{MaxConns: -1}, {MaxPending: -1}, {RecvBuffer: 100}, {HandshakeTimeout: -time.Second}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
	n, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := n.GuestConfig()
	if cfg.Addr.String() != "10.83.0.2/24" || cfg.Gateway != gatewayAddr || cfg.DNS != gatewayAddr || cfg.MTU != 1500 {
		t.Errorf("GuestConfig %+v", cfg)
	}
}

func TestDenialsRateBounded(t *testing.T) {
	sb := newSandbox(t, Options{DenialRate: 10}, nil)
	g := sb.guest
	start := time.Now()
	for i := range 500 {
		f := ipFrame(guestAddr, netip.MustParseAddr("8.8.8.8"), header.UDPProtocolNumber, make([]byte, header.UDPMinimumSize), func(ip header.IPv4) {
			u := header.UDP(ip.Payload())
			u.SetSourcePort(uint16(20000 + i))
			u.SetDestinationPort(53)
			u.SetLength(header.UDPMinimumSize)
		})
		if err := g.wire.writeFrame(f); err != nil {
			t.Fatal(err)
		}
	}
	// Reporting is asynchronous: wait for some of both, then a little
	// for the queue to drain.
	deadline := time.Now().Add(3 * time.Second)
	for {
		sb.mu.Lock()
		got := len(sb.denials)
		sb.mu.Unlock()
		if den, _ := sb.net.Dropped(); den > 0 && got > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	sb.mu.Lock()
	got := len(sb.denials)
	sb.mu.Unlock()
	most := 10 + int(10*time.Since(start).Seconds()) + 1
	den, _ := sb.net.Dropped()
	if got == 0 || got > most || den == 0 {
		t.Errorf("%d denials reported, %d dropped; want 1 to %d reported and some dropped", got, den, most)
	}
}

// TestFlowBuffersBounded: a flow whose Handle never reads holds at most
// RecvBuffer bytes of what the guest sends; the guest's writes stall.
func TestFlowBuffersBounded(t *testing.T) {
	const limit = 64 << 10
	flows := make(chan net.Conn, 1)
	sb := newSandbox(t, Options{
		Resolve:    allowNames("api.example.com"),
		Accept:     func(string, uint16) bool { return true },
		RecvBuffer: limit,
		Handle: func(ctx context.Context, f Flow, conn net.Conn) {
			flows <- conn
			<-ctx.Done()
		},
	}, nil)
	g := sb.guest
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := g.dial(ctx, g.resolve(t, "api.example.com."), 443)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-flows
	c.SetWriteDeadline(time.Now().Add(time.Second))
	chunk := make([]byte, 16<<10)
	sent := 0
	for sent < 64<<20 {
		n, err := c.Write(chunk)
		sent += n
		if err != nil {
			break
		}
	}
	sb.net.mu.Lock()
	var queued int
	for _, fl := range sb.net.flows {
		q, terr := fl.ep.GetSockOptInt(tcpip.ReceiveQueueSizeOption)
		if terr != nil {
			t.Fatal(terr)
		}
		queued += q
	}
	sb.net.mu.Unlock()
	if queued == 0 || queued > limit {
		t.Errorf("the host holds %d bytes of the flow (the guest wrote %d); want some, at most %d", queued, sent, limit)
	}
}

// TestClosedFlowsDoNotLinger: connections the host closes first would
// each hold an endpoint in TIME_WAIT for a minute, and ones the guest
// never finishes closing one in FIN_WAIT_2; a guest opening and closing
// connections in a loop must not pile them up.
func TestClosedFlowsDoNotLinger(t *testing.T) {
	sb := newSandbox(t, Options{
		Resolve: allowNames("api.example.com"),
		Accept:  func(string, uint16) bool { return true },
		Handle: func(ctx context.Context, f Flow, conn net.Conn) {
			conn.Write([]byte("x"))
		},
	}, nil)
	g := sb.guest
	addr := g.resolve(t, "api.example.com.")
	const conns = 300
	for i := range conns {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := g.dial(ctx, addr, 443)
		cancel()
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		io.ReadAll(c)
		c.Close()
	}
	peak := len(sb.net.stk.RegisteredEndpoints())
	deadline := time.Now().Add(4 * time.Second)
	for {
		left := len(sb.net.stk.RegisteredEndpoints())
		if left <= 4 { // the DNS sockets, and a straggler
			t.Logf("%d endpoints after %d connections, %d now", peak, conns, left)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d endpoints still registered 4s after %d connections closed (%d at first)", left, conns, peak)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
