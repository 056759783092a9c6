package netstack

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
)

// echo is a Handle that sends back what it reads, and records the flows
// it was given.
type echo struct {
	mu    sync.Mutex
	flows []Flow
}

func (e *echo) handle(ctx context.Context, f Flow, conn net.Conn) {
	e.mu.Lock()
	e.flows = append(e.flows, f)
	e.mu.Unlock()
	io.Copy(conn, conn)
}

func allowPorts(name string, ports ...uint16) func(string, uint16) bool {
	return func(n string, p uint16) bool {
		if n != name {
			return false
		}
		for _, x := range ports {
			if p == x {
				return true
			}
		}
		return false
	}
}

func TestTCPToAllowedNameReachesHandle(t *testing.T) {
	var e echo
	sb := newSandbox(t, Options{
		Resolve: allowNames("api.example.com"),
		Accept:  allowPorts("api.example.com", 443),
		Handle:  e.handle,
	}, nil)
	g := sb.guest
	addr := g.resolve(t, "api.example.com.")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := g.dial(ctx, addr, 443)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := []byte("GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("echoed %q, sent %q", got, msg)
	}
	flows := sb.net.Flows()
	if len(flows) != 1 {
		t.Fatalf("Flows() = %+v, want one", flows)
	}
	f := flows[0]
	local := c.LocalAddr().(*net.TCPAddr)
	wantSrc := netip.AddrPortFrom(guestAddr, uint16(local.Port))
	if f.Name != "api.example.com" || f.Port != 443 || f.Dst != netip.AddrPortFrom(addr, 443) || f.Src != wantSrc {
		t.Errorf("flow %+v; want api.example.com:443 to %v from %v", f, addr, wantSrc)
	}
	e.mu.Lock()
	handled := append([]Flow(nil), e.flows...)
	e.mu.Unlock()
	if len(handled) != 1 || handled[0] != f {
		t.Errorf("Handle got %+v, Flows() %+v", handled, f)
	}
}

// TestTCPLargeStream sends 50 MB each way through one flow.
func TestTCPLargeStream(t *testing.T) {
	var e echo
	sb := newSandbox(t, Options{
		Resolve: allowNames("big.example.com"),
		Accept:  allowPorts("big.example.com", 80),
		Handle:  e.handle,
	}, nil)
	g := sb.guest
	addr := g.resolve(t, "big.example.com.")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := g.dial(ctx, addr, 80)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	size := 50 << 20
	if raceEnabled {
		size = 8 << 20
	}
	c.SetDeadline(time.Now().Add(60 * time.Second))
	pattern := make([]byte, 64<<10)
	for i := range pattern {
		pattern[i] = byte(i*7 + i>>8)
	}
	errc := make(chan error, 1)
	go func() {
		for sent := 0; sent < size; sent += len(pattern) {
			if _, err := c.Write(pattern); err != nil {
				errc <- err
				return
			}
		}
		errc <- c.CloseWrite()
	}()
	buf := make([]byte, len(pattern))
	got := 0
	for got < size {
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatalf("after %d bytes back: %v", got, err)
		}
		if !bytes.Equal(buf, pattern) {
			t.Fatalf("bytes %d.. came back changed", got)
		}
		got += len(buf)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(buf); n != 0 || err != io.EOF {
		t.Errorf("after the stream: %d bytes, %v; want EOF", n, err)
	}
}

// TestTCPRefusedDestinations: every destination but a synthetic address
// the policy allows for that port is refused with a reset at once, and
// reported.
func TestTCPRefusedDestinations(t *testing.T) {
	var e echo
	sb := newSandbox(t, Options{
		Resolve: allowNames("api.example.com"),
		Accept:  allowPorts("api.example.com", 443),
		Handle:  e.handle,
	}, nil)
	g := sb.guest
	addr := g.resolve(t, "api.example.com.")
	for _, c := range []struct {
		dst    netip.AddrPort
		name   string
		reason string
	}{
		{netip.AddrPortFrom(addr, 22), "api.example.com", "not allowed by the egress policy"},
		{netip.MustParseAddrPort("169.254.169.254:80"), "", "link-local"},
		{netip.MustParseAddrPort("127.0.0.1:443"), "", "loopback"},
		{netip.MustParseAddrPort("127.0.0.5:8443"), "", "loopback"},
		{netip.MustParseAddrPort("10.83.0.1:80"), "", "gateway serves only DNS"},
		{netip.MustParseAddrPort("10.83.0.7:443"), "", "private"},
		{netip.MustParseAddrPort("192.168.1.1:443"), "", "private"},
		{netip.MustParseAddrPort("93.184.216.34:443"), "", "connect by name"},
		{netip.MustParseAddrPort("198.18.200.1:443"), "", "not given out"},
	} {
		t.Run(c.dst.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			start := time.Now()
			conn, err := g.dial(ctx, c.dst.Addr(), c.dst.Port())
			if err == nil {
				conn.Close()
				t.Fatalf("connected to %v", c.dst)
			}
			if !strings.Contains(err.Error(), "refused") {
				t.Fatalf("dial %v: %v; want connection refused", c.dst, err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("refused after %v", d)
			}
			d := sb.waitDenial(t, func(d Denial) bool { return d.Proto == "tcp" && d.Dst == c.dst })
			if d.Name != c.name || !strings.Contains(d.Reason, c.reason) {
				t.Errorf("denial %+v; want name %q, reason with %q", d, c.name, c.reason)
			}
		})
	}
	if len(e.flows) != 0 {
		t.Errorf("Handle saw %+v", e.flows)
	}
}

// TestTCPNotAcceptedAfterPolicyChange: Accept is asked for each
// connection, not once per name.
func TestTCPAcceptAskedPerConnection(t *testing.T) {
	var mu sync.Mutex
	allowed := true
	var e echo
	sb := newSandbox(t, Options{
		Resolve: allowNames("api.example.com"),
		Accept: func(string, uint16) bool {
			mu.Lock()
			defer mu.Unlock()
			return allowed
		},
		Handle: e.handle,
	}, nil)
	g := sb.guest
	addr := g.resolve(t, "api.example.com.")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := g.dial(ctx, addr, 443)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	mu.Lock()
	allowed = false
	mu.Unlock()
	if c, err := g.dial(ctx, addr, 443); err == nil {
		c.Close()
		t.Fatal("connected after Accept turned false")
	}
}

func TestUDPElsewhereDroppedAndReported(t *testing.T) {
	sb := newSandbox(t, Options{Resolve: allowNames("api.example.com")}, nil)
	g := sb.guest
	dst := netip.MustParseAddrPort("8.8.8.8:53")
	c, err := gonet.DialUDP(g.stk, nil, &tcpip.FullAddress{NIC: 1, Addr: tcpAddr(dst.Addr()), Port: 53}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := []byte{0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 'c', 'o', 'm', 0, 0, 1, 0, 1}
	if _, err := c.Write(q); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if n, err := c.Read(make([]byte, 512)); err == nil {
		t.Fatalf("got a %d-byte answer from %v", n, dst)
	}
	d := sb.waitDenial(t, func(d Denial) bool { return d.Proto == "udp" && d.Dst == dst })
	if !strings.Contains(d.Reason, "only to the sandbox's DNS server") {
		t.Errorf("reason %q", d.Reason)
	}
}

func TestMaxConns(t *testing.T) {
	release := make(chan struct{})
	sb := newSandbox(t, Options{
		Resolve:  allowNames("api.example.com"),
		Accept:   allowPorts("api.example.com", 443),
		MaxConns: 2,
		Handle: func(ctx context.Context, f Flow, conn net.Conn) {
			select {
			case <-release:
			case <-ctx.Done():
			}
		},
	}, nil)
	g := sb.guest
	addr := g.resolve(t, "api.example.com.")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var open []*gonet.TCPConn
	for range 2 {
		c, err := g.dial(ctx, addr, 443)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	waitFlows(t, sb.net, 2)
	if c, err := g.dial(ctx, addr, 443); err == nil {
		c.Close()
		t.Fatal("a third connection got through with MaxConns 2")
	}
	d := sb.waitDenial(t, func(d Denial) bool { return d.Proto == "tcp" })
	if !strings.Contains(d.Reason, "2 open connections") {
		t.Errorf("denial %+v", d)
	}
	close(release)
	waitFlows(t, sb.net, 0)
	c, err := g.dial(ctx, addr, 443)
	if err != nil {
		t.Fatalf("after the flows ended: %v", err)
	}
	c.Close()
	for _, c := range open {
		c.Close()
	}
}

func waitFlows(t testing.TB, n *Network, want int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for len(n.Flows()) != want {
		if time.Now().After(deadline) {
			t.Fatalf("flows %+v; want %d", n.Flows(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCloseFlowsResetsTheFlow(t *testing.T) {
	handleDone := make(chan error, 2)
	sb := newSandbox(t, Options{
		Resolve: allowNames("a.example.com", "b.example.com"),
		Accept:  func(string, uint16) bool { return true },
		Handle: func(ctx context.Context, f Flow, conn net.Conn) {
			conn.Write([]byte("hi"))
			<-ctx.Done()
			_, err := conn.Read(make([]byte, 1))
			handleDone <- err
		},
	}, nil)
	g := sb.guest
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ca, err := g.dial(ctx, g.resolve(t, "a.example.com."), 443)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	cb, err := g.dial(ctx, g.resolve(t, "b.example.com."), 443)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	waitFlows(t, sb.net, 2)
	if n := sb.net.CloseFlows(func(f Flow) bool { return f.Name == "a.example.com" }); n != 1 {
		t.Fatalf("CloseFlows closed %d, want 1", n)
	}
	if fl := sb.net.Flows(); len(fl) != 1 || fl[0].Name != "b.example.com" {
		t.Errorf("open after CloseFlows: %+v", fl)
	}
	select {
	case err := <-handleDone:
		if err == nil {
			t.Error("Handle's conn still reads after CloseFlows")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Handle's context not done within 3s of CloseFlows")
	}
	ca.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 16)
	io.ReadFull(ca, buf[:2])
	_, err = ca.Read(buf)
	if err == nil || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "timeout") {
		t.Errorf("guest's closed connection reads %v; want a reset", err)
	}
	cb.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.ReadFull(cb, buf[:2]); err != nil || string(buf[:2]) != "hi" {
		t.Errorf("the other flow: %q, %v", buf[:2], err)
	}
}

// TestPolicyChangeDuringHandshake: a flow whose Accept turns false
// between the SYN and the flow being listed (where CloseFlows cannot see
// it) is reset before Handle sees it.
func TestPolicyChangeDuringHandshake(t *testing.T) {
	var calls atomic.Int32
	var e echo
	sb := newSandbox(t, Options{
		Resolve: allowNames("api.example.com"),
		Accept:  func(string, uint16) bool { return calls.Add(1) == 1 },
		Handle:  e.handle,
	}, nil)
	g := sb.guest
	addr := g.resolve(t, "api.example.com.")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := g.dial(ctx, addr, 443)
	if err == nil {
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		_, err = c.Read(make([]byte, 1))
		c.Close()
		if err == nil || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "timeout") {
			t.Errorf("read %v; want a reset", err)
		}
	}
	sb.waitDenial(t, func(d Denial) bool { return strings.Contains(d.Reason, "during the handshake") })
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.flows) != 0 {
		t.Errorf("Handle saw %+v", e.flows)
	}
}
