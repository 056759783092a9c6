package netstack

import (
	"context"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BenchmarkTCPThroughput measures one flow from the guest's stack to a
// Handle that discards, through both stacks and the framed socket pair
// between them, in MB/s.
func BenchmarkTCPThroughput(b *testing.B) {
	sb := newSandbox(b, Options{
		Resolve: allowNames("bench.example.com"),
		Accept:  allowPorts("bench.example.com", 80),
		Handle: func(ctx context.Context, f Flow, conn net.Conn) {
			io.Copy(io.Discard, conn)
		},
	}, nil)
	g := sb.guest
	addr := g.resolve(b, "bench.example.com.")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := g.dial(ctx, addr, 80)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	chunk := make([]byte, 1<<20)
	b.SetBytes(int64(len(chunk)))
	b.ResetTimer()
	c.SetWriteDeadline(time.Now().Add(time.Minute))
	for range b.N {
		if _, err := c.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzAnswer(f *testing.F) {
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"api.example.com.", dns.TypeA}, {"x.", dns.TypeAAAA}, {"t.example.com.", dns.TypeTXT}} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		b, _ := m.Pack()
		f.Add(b)
	}
	f.Add([]byte{0xab, 0xcd, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xff})
	n, err := New(Options{Resolve: func(string) bool { return true }, MaxNames: 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, req []byte) {
		resp := n.answer(req)
		if resp == nil {
			return
		}
		var m dns.Msg
		if err := m.Unpack(resp); err != nil {
			t.Fatalf("reply does not parse: %v", err)
		}
		if !m.Response || len(m.Answer) > 1 {
			t.Fatalf("reply %v", &m)
		}
		for _, rr := range m.Answer {
			a, ok := rr.(*dns.A)
			if !ok {
				t.Fatalf("answer %v", rr)
			}
			addr, _ := netipFromIP(a.A)
			if !synthetic.Contains(addr) {
				t.Fatalf("answer %v outside %v", addr, synthetic)
			}
		}
	})
}

func FuzzAdmit(f *testing.F) {
	f.Add(tcpFrame(tcpAddr(guestAddr), tcpAddr(gatewayAddr), 1, 53, 1, 0, 2))
	f.Add(ipFrame(guestAddr, gatewayAddr, 1, icmpEcho(1), nil))
	n, err := New(Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		n.admit(frame)
	})
}

func netipFromIP(ip net.IP) (netip.Addr, bool) { return netip.AddrFromSlice(ip.To4()) }
