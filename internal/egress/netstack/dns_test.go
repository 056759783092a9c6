package netstack

import (
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"
)

func allowNames(names ...string) func(string) bool {
	return func(n string) bool {
		for _, x := range names {
			if n == x {
				return true
			}
		}
		return false
	}
}

func TestDNSAllowedNameGetsStableSyntheticAddress(t *testing.T) {
	sb := newSandbox(t, Options{Resolve: allowNames("api.example.com", "git.example.org")}, nil)
	g := sb.guest
	a := g.resolve(t, "api.example.com.")
	if !synthetic.Contains(a) {
		t.Fatalf("api.example.com got %v, outside %v", a, synthetic)
	}
	if again := g.resolve(t, "API.Example.COM."); again != a {
		t.Errorf("same name in other case got %v, first %v", again, a)
	}
	b := g.resolve(t, "git.example.org.")
	if b == a || !synthetic.Contains(b) {
		t.Errorf("git.example.org got %v (api.example.com has %v)", b, a)
	}
	if name, ok := sb.net.names.name(a); !ok || name != "api.example.com" {
		t.Errorf("address %v maps back to %q, %v", a, name, ok)
	}
	// AAAA of an allowed name: NOERROR with no answer, so that resolvers
	// use the A answer rather than conclude the name does not exist.
	r := g.query(t, "api.example.com.", dns.TypeAAAA)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
		t.Errorf("AAAA of an allowed name: rcode %s, %d answers; want NOERROR and none", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
}

func TestDNSRefusals(t *testing.T) {
	var resolved atomic.Int32
	sb := newSandbox(t, Options{Resolve: func(n string) bool {
		resolved.Add(1)
		return n == "api.example.com"
	}}, nil)
	g := sb.guest
	dnsDst := netip.MustParseAddrPort("10.83.0.1:53")
	for _, c := range []struct {
		name  string
		qtype uint16
		rcode int
	}{
		{"evil.example.net.", dns.TypeA, dns.RcodeNameError},
		{"evil.example.net.", dns.TypeAAAA, dns.RcodeNameError},
		// A tunnel through the resolver: TXT (and any type but A and
		// AAAA) is refused even for an allowed name.
		{"aGVsbG8.api.example.com.", dns.TypeTXT, dns.RcodeRefused},
		{"api.example.com.", dns.TypeTXT, dns.RcodeRefused},
		{"api.example.com.", dns.TypeMX, dns.RcodeRefused},
		{"example.com.", dns.TypeANY, dns.RcodeRefused},
		// A name only through an escape the DNS library keeps.
		{"api\\.example.com.", dns.TypeA, dns.RcodeNameError},
	} {
		r := g.query(t, c.name, c.qtype)
		if r.Rcode != c.rcode || len(r.Answer) != 0 {
			t.Errorf("%s %s: rcode %s with %d answers; want %s and none", dns.Type(c.qtype), c.name,
				dns.RcodeToString[r.Rcode], len(r.Answer), dns.RcodeToString[c.rcode])
		}
		want := strings.ToLower(strings.TrimSuffix(c.name, "."))
		sb.waitDenial(t, func(d Denial) bool { return d.Proto == "dns" && d.Dst == dnsDst && d.Name == want || d.Name == c.name })
	}
	sb.waitDenial(t, func(d Denial) bool { return strings.Contains(d.Reason, "TXT") })
	// Resolve was asked for the A and AAAA queries only, not the refused
	// types nor the escaped name.
	if got := resolved.Load(); got != 2 {
		t.Errorf("Resolve called %d times, want 2", got)
	}
}
