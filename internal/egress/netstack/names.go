package netstack

import (
	"net/netip"
	"strings"
	"sync"
)

// synthetic is the range synthetic addresses come from: 198.18.0.0/15,
// set aside for benchmarking (RFC 2544) and so never a real destination
// a sandbox could mean.
var synthetic = netip.MustParsePrefix("198.18.0.0/15")

// names maps the names DNS has answered to the synthetic addresses it
// gave them, both ways. An address, once given, stays its name's for the
// life of the Network: a guest that cached it can still connect, and a
// connection's name is always the one it looked up. Addresses are handed
// out in order from 198.18.0.1, so the table never collides; it is bounded
// by max.
type names struct {
	mu     sync.Mutex
	max    int
	next   netip.Addr
	byName map[string]netip.Addr
	byAddr map[netip.Addr]string
}

func newNames(max int) *names {
	return &names{
		max:    max,
		next:   synthetic.Addr().Next(),
		byName: make(map[string]netip.Addr),
		byAddr: make(map[netip.Addr]string),
	}
}

// addr returns name's address, giving it one if it has none yet. It
// reports false when the table is full or the range is used up.
func (t *names) addr(name string) (netip.Addr, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, ok := t.byName[name]; ok {
		return a, true
	}
	if len(t.byName) >= t.max || !synthetic.Contains(t.next) || t.next == lastSynthetic {
		return netip.Addr{}, false
	}
	a := t.next
	t.next = a.Next()
	t.byName[name] = a
	t.byAddr[a] = name
	return a, true
}

// lastSynthetic is the range's broadcast-looking last address, never given
// out so that no guest stack treats an answer as a broadcast address.
var lastSynthetic = netip.MustParseAddr("198.19.255.255")

// name returns the name behind a synthetic address DNS gave out.
func (t *names) name(a netip.Addr) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.byAddr[a]
	return n, ok
}

// canonicalName lowers a queried name's case and drops its trailing dot;
// it reports false for a name no policy can mean: empty (the root), or
// holding bytes the DNS library had to escape (a dot inside a label,
// control characters, spaces), which could otherwise read as another
// name once unescaped.
func canonicalName(qname string) (string, bool) {
	n := strings.ToLower(strings.TrimSuffix(qname, "."))
	if n == "" || len(n) > 253 {
		return "", false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.', c == '_':
		default:
			return "", false
		}
	}
	if strings.HasPrefix(n, ".") || strings.Contains(n, "..") {
		return "", false
	}
	return n, true
}
