package sandboxnet_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/egress/netstack"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/policy"
)

// holder is a raw TCP upstream that keeps every connection open and
// echoes what it reads; it counts the connections open at once.
type holder struct {
	ln         net.Listener
	open, peak atomic.Int64
	wg         sync.WaitGroup
}

func newHolder(t *testing.T) *holder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &holder{ln: ln}
	h.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := h.open.Add(1)
			for p := h.peak.Load(); n > p && !h.peak.CompareAndSwap(p, n); p = h.peak.Load() {
			}
			h.wg.Go(func() {
				defer h.open.Add(-1)
				defer c.Close()
				c.SetDeadline(time.Now().Add(3 * time.Minute))
				io.Copy(c, c)
			})
		}
	})
	t.Cleanup(func() { ln.Close() })
	return h
}

// rssBytes is the test process's resident set, from /proc/self/status.
func rssBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// recvLines returns the "recv ..." lines of the raw guest's output, the
// frames the host sent back, without the prefix.
func recvLines(out string) []string {
	var lines []string
	for line := range strings.SplitSeq(out, "\n") {
		if r, ok := strings.CutPrefix(line, "recv "); ok {
			lines = append(lines, r)
		}
	}
	return lines
}

var tcpLine = regexp.MustCompile(`^tcp (\S+):(\d+) > (\S+):(\d+) flags=(\w*)$`)

// TestHostileGuestRawPackets boots one sandbox and, as root in the guest,
// writes frames by hand on eth0 (testdata/rawguest): SYNs to addresses
// DNS never gave out, with the guest's address and forged ones; spoofed
// and flooded ARP; IP fragments; UDP and ICMP to the outside; IPv6; hostile
// DNS over TCP and a burst over UDP; a probe hidden among refusals; SYN
// floods to an allowed name and to the DNS port; more connections than
// the sandbox may hold. Each case asserts what the host sent back (a
// reset or nothing, never a handshake from an address DNS did not give
// out), the audit entry and its reason where the network reports one,
// and that an allowed HTTPS request still works afterwards; at the end,
// that nothing but those requests reached the upstream and that the
// network never failed.
func TestHostileGuestRawPackets(t *testing.T) {
	_, _, img := machinetest.Require(t)
	caPEM, cert := upstreamCA(t, "api.test")
	var requests atomic.Int64
	addr := tlsUpstream(t, cert, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		fmt.Fprintf(w, "hello from %s\n", r.Host)
	}))
	hold := newHolder(t)

	const maxConns = netstack.DefaultMaxConns
	pol := policy.Sandbox{
		Allow: []policy.AllowRule{{Pattern: policy.MustHostPattern("api.test"), Origin: policy.Origin{Block: "egress.api", File: "sbx.hcl", Line: 3}}},
		TCP:   []policy.TCPRule{{Dest: policy.HostPort{Host: "hold.test", Port: 7000}, Origin: policy.Origin{Block: "egress.hold", File: "sbx.hcl", Line: 5}}},
		Hosts: []policy.HostMapping{{Name: "api.test", Addr: addr}, {Name: "hold.test", Addr: hold.ln.Addr().String()}},
		CAs:   []policy.CA{{Path: "upstream.pem", PEM: string(caPEM)}},
	}
	sb := bootVM(t, img, "hostile", 10*time.Minute, pol, nil)
	m, n, auditDir := sb.m, sb.n, sb.auditDir
	ns, ok := n.Network().(*netstack.Network)
	if !ok {
		t.Fatalf("the sandbox's network is a %T", n.Network())
	}
	sb.install(t, "guestclient", "/bin/gc")
	sb.install(t, "rawguest", "/bin/rawguest")

	run := func(t *testing.T, args ...string) string {
		t.Helper()
		out, st, err := sb.exec(2*time.Minute, "root", args...)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if st.Code != 0 {
			t.Fatalf("%q exited %d:\n%s", args, st.Code, out)
		}
		return out
	}
	// stillServes is the check after every attack: an allowed HTTPS
	// request through the engine completes, within the client's own
	// 20 s timeout.
	wantRequests := int64(0)
	stillServes := func(t *testing.T) {
		t.Helper()
		out := run(t, "gc", "get", "https://api.test/after")
		if !strings.Contains(out, "status 200") || !strings.Contains(out, "hello from api.test") {
			t.Errorf("an allowed request after the attack: %s", out)
		}
		wantRequests++
	}
	// audited waits for an audit entry match takes, printing the log if
	// none comes.
	audited := func(t *testing.T, what string, match func(audit.Entry) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			entries, err := audit.Tail(auditDir, 50000)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if match(e) {
					if e.Decision != audit.DecisionDeny || e.Reason == "" {
						t.Errorf("%s: entry %s is not a refusal with a reason", what, audit.Format(e))
					}
					return
				}
			}
			if time.Now().After(deadline) {
				var s strings.Builder
				for _, e := range entries[max(0, len(entries)-60):] {
					s.WriteString(audit.Format(e) + "\n")
				}
				t.Errorf("no audit entry for %s; the log ends:\n%s", what, s.String())
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	denied := func(dst, reason string) func(audit.Entry) bool {
		return func(e audit.Entry) bool { return e.Dst == dst && strings.Contains(e.Reason, reason) }
	}

	// The synthetic address DNS gives api.test, from inside.
	var apiAddr netip.Addr
	for f := range strings.FieldsSeq(run(t, "nslookup", "api.test", "10.83.0.1")) {
		if a, err := netip.ParseAddr(f); err == nil && netip.MustParsePrefix("198.18.0.0/15").Contains(a) {
			apiAddr = a
		}
	}
	if !apiAddr.IsValid() {
		t.Fatal("api.test did not resolve to a synthetic address in the guest")
	}

	t.Run("SYNs to addresses DNS never gave out", func(t *testing.T) {
		// From the guest's own address: a reset or nothing, never a
		// SYN-ACK but from the one address DNS gave out so far, which
		// must answer (so that the guest is seen to be able to see a
		// SYN-ACK at all).
		out := run(t, "rawguest", "syn", "1.1.1.1:443", "169.254.169.254:80", "127.0.0.1:22", "10.83.0.1:22",
			"198.18.0.200:443", "10.83.0.77:80", "api.test:443")
		handshake := false
		for _, r := range recvLines(out) {
			mt := tcpLine.FindStringSubmatch(r)
			if mt == nil {
				continue
			}
			src := netip.MustParseAddr(mt[1])
			if strings.Contains(mt[5], "S") {
				if src != apiAddr {
					t.Errorf("a handshake from %s: %s", src, r)
				}
				handshake = handshake || src == apiAddr && mt[2] == "443"
			}
		}
		if !handshake {
			t.Errorf("no SYN-ACK from api.test's address %s:443; the guest sees nothing:\n%s", apiAddr, out)
		}
		for _, c := range []struct{ dst, reason string }{
			{"1.1.1.1", "IP address not given out"},
			{"169.254.169.254", "link-local"},
			{"127.0.0.1", "loopback"},
			{"10.83.0.1", "the gateway serves only DNS"},
			{"198.18.0.200", "address not given out by the sandbox's DNS"},
			{"10.83.0.77", "private address"},
		} {
			audited(t, "a SYN to "+c.dst, func(e audit.Entry) bool {
				return e.Proto == "tcp" && e.Dst == c.dst && strings.Contains(e.Reason, c.reason)
			})
		}

		// From forged sources: nothing at all comes back, not even the
		// host asking where the forged address is (which it would, to
		// answer it).
		for _, src := range []string{"10.83.0.9", "203.0.113.7"} {
			out := run(t, "rawguest", "syn", "-src", src, "1.1.1.1:443", "169.254.169.254:80", "127.0.0.1:22", "10.83.0.1:22", "api.test:443")
			for _, r := range recvLines(out) {
				if strings.HasPrefix(r, "tcp ") || strings.Contains(r, "who-has "+src) {
					t.Errorf("from %s: the host answered: %s", src, r)
				}
			}
			audited(t, "a forged source "+src, func(e audit.Entry) bool {
				return e.Proto == "ip" && strings.Contains(e.Reason, "source address "+src)
			})
		}
	})

	t.Run("ARP spoofing and a gratuitous flood", func(t *testing.T) {
		out := run(t, "rawguest", "arp", "-flood", "3000")
		// The host's stack answers who-has for any address of the link
		// (it is the only other thing on it, and refuses traffic to
		// those addresses itself), but always with its own MAC: what the
		// guest claimed is never taken up.
		gw := false
		for _, r := range recvLines(out) {
			if !strings.HasPrefix(r, "arp reply ") {
				continue
			}
			gw = gw || r == "arp reply 10.83.0.1 is-at 02:83:00:00:00:01 to 10.83.0.2"
			if !strings.Contains(r, " is-at 02:83:00:00:00:01 ") {
				t.Errorf("the host answered ARP with %q", r)
			}
		}
		if !gw {
			t.Errorf("after the spoofing the gateway does not answer who-has 10.83.0.1 with its own MAC:\n%s", out)
		}
		stillServes(t)
	})

	t.Run("IP fragments", func(t *testing.T) {
		out := run(t, "rawguest", "frag", "-allowed", "443", "-denied", "22", "api.test")
		for _, r := range recvLines(out) {
			mt := tcpLine.FindStringSubmatch(r)
			if mt == nil {
				continue
			}
			if p, _ := strconv.Atoi(mt[4]); p >= 31001 && p <= 31005 {
				t.Errorf("the host answered a fragmented SYN: %s", r)
			}
		}
		if !strings.Contains(out, "sent frag last-first") {
			t.Fatalf("the raw guest did not send every series:\n%s", out)
		}
		audited(t, "fragments", denied(apiAddr.String(), "fragmented IP packet"))
	})

	t.Run("UDP but DNS to the gateway", func(t *testing.T) {
		out := run(t, "rawguest", "udp", "8.8.8.8:53", "1.1.1.1:53", "10.83.0.1:123", "10.83.0.1:5353", "api.test:53", "10.83.0.1:53")
		// The one datagram that may be answered is the raw query to the
		// gateway's port 53 (the guest's own resolver asked too, to look
		// up api.test, and is answered from there as well).
		mt := regexp.MustCompile(`sent udp 10\.83\.0\.2:(\d+) > 10\.83\.0\.1:53\n`).FindStringSubmatch(out)
		if mt == nil {
			t.Fatalf("no query to the gateway sent:\n%s", out)
		}
		answers := 0
		for _, r := range recvLines(out) {
			switch {
			case strings.HasPrefix(r, "udp 10.83.0.1:53 > 10.83.0.2:"+mt[1]+" "):
				answers++
			case strings.HasPrefix(r, "udp 10.83.0.1:53 > 10.83.0.2:"):
			case strings.HasPrefix(r, "udp "), strings.HasPrefix(r, "icmp "):
				t.Errorf("the host answered stray UDP: %s", r)
			}
		}
		if answers != 1 {
			t.Errorf("%d answers to the raw query to the sandbox's DNS server, want 1:\n%s", answers, out)
		}
		audited(t, "UDP to 8.8.8.8:53", denied("8.8.8.8", "UDP is carried only to the sandbox's DNS server"))
		audited(t, "UDP to the gateway's port 123", func(e audit.Entry) bool {
			return e.Proto == "udp" && e.Dst == "10.83.0.1" && e.Port == 123
		})
	})

	t.Run("hostile DNS over TCP", func(t *testing.T) {
		out := run(t, "rawguest", "dnstcp")
		got := map[string]string{}
		for line := range strings.SplitSeq(out, "\n") {
			if f := strings.SplitN(line, " ", 3); len(f) == 3 && f[0] == "dnstcp" {
				got[f[1]] = f[2]
			}
		}
		for _, what := range []string{"txt", "txt-tunnel"} {
			if got[what] != "rcode=5 answers=0" {
				t.Errorf("%s: %q, want REFUSED and no answer", what, got[what])
			}
		}
		for _, what := range []string{"long-name", "long-label", "pointer-self", "pointer-loop"} {
			v, ok := got[what]
			if !ok || strings.Contains(v, "rcode=0") || strings.Contains(v, "answers=") && !strings.Contains(v, "answers=0") {
				t.Errorf("%s: %q; want an error or a closed connection", what, v)
			}
		}
		t.Logf("answers over TCP: %q", got)
		if got["a"] != "rcode=0 answers=1" {
			t.Errorf("an honest A query after the hostile ones: %q", got["a"])
		}
		audited(t, "a TXT query", func(e audit.Entry) bool {
			return e.Proto == "dns" && e.Name == "api.test" && strings.Contains(e.Reason, "TXT")
		})
	})

	t.Run("IPv6", func(t *testing.T) {
		out := run(t, "rawguest", "ipv6")
		for _, r := range recvLines(out) {
			if strings.HasPrefix(r, "ipv6") {
				t.Errorf("the host answered IPv6: %s", r)
			}
		}
		if strings.Count(out, "sent ipv6") != 6 {
			t.Errorf("the raw guest did not send every IPv6 packet:\n%s", out)
		}
	})

	t.Run("ICMP", func(t *testing.T) {
		var outs []string
		outs = append(outs, run(t, "rawguest", "icmp", "1.1.1.1", "169.254.169.254", "api.test", "127.0.0.1", "10.83.0.1"))
		outs = append(outs, run(t, "rawguest", "icmp", "-type", "13", "10.83.0.1", "1.1.1.1"))
		outs = append(outs, run(t, "rawguest", "icmp", "-type", "42", "10.83.0.1"))
		outs = append(outs, run(t, "rawguest", "icmp", "-src", "10.83.0.9", "10.83.0.1", "1.1.1.1"))
		echo := 0
		for i, out := range outs {
			for _, r := range recvLines(out) {
				switch {
				case i == 0 && r == "icmp 10.83.0.1 > 10.83.0.2 type=0 code=0":
					echo++
				case i == 1 && strings.HasPrefix(r, "icmp 10.83.0.1 > 10.83.0.2 type=14 "):
					// A timestamp reply from the gateway may come or not.
				case strings.HasPrefix(r, "icmp "), strings.Contains(r, "who-has 10.83.0.9"), strings.HasPrefix(r, "ipv4 "):
					t.Errorf("the host answered ICMP: %s (run %d)", r, i)
				}
			}
		}
		if echo != 1 {
			t.Errorf("%d echo replies from the gateway, want 1:\n%s", echo, outs[0])
		}
		audited(t, "ICMP to 1.1.1.1", denied("1.1.1.1", "ICMP is answered only by the gateway"))
		audited(t, "ICMP to api.test's address", denied(apiAddr.String(), "ICMP is answered only by the gateway"))
	})

	// A guest that wants a probe to go unseen hides it among refusals:
	// the network reports at most DenialRate a second, so the probe's
	// own entry may be lost, but then the log must say that entries were
	// lost (as the audit writer does for what the disk cannot take), or
	// nobody reading it can tell that it is incomplete. Checked at the
	// end, once the log is closed, so that a summary written at close
	// counts.
	var hiddenLost uint64
	t.Run("a probe hidden among refusals", func(t *testing.T) {
		before, _ := ns.Dropped()
		out := run(t, "rawguest", "hide", "-n", "1000", "169.254.169.254:81")
		after, _ := ns.Dropped()
		hiddenLost = after - before
		t.Logf("%d refusals the network did not report", hiddenLost)
		if !strings.Contains(out, "sent probe syn") {
			t.Fatalf("no probe sent:\n%s", out)
		}
		for _, r := range recvLines(out) {
			if strings.HasPrefix(r, "tcp 169.254.169.254:81 ") && strings.Contains(r, "S") || strings.HasPrefix(r, "icmp ") {
				t.Errorf("the host answered: %s", r)
			}
		}
		time.Sleep(1500 * time.Millisecond) // the denials' rate refills
	})

	t.Run("1000 DNS queries in a burst", func(t *testing.T) {
		out := run(t, "rawguest", "dnsburst", "-n", "1000", "api.test")
		var sent, answered int
		var secs float64
		if _, err := fmt.Sscanf(strings.TrimSpace(out[strings.Index(out, "dnsburst"):]), "dnsburst sent=%d answered=%d seconds=%g", &sent, &answered, &secs); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		// 200 a second with 200 saved up; the answers to queries sent
		// during the last second of waiting may count too.
		bound := netstack.DefaultDNSRate + int(float64(netstack.DefaultDNSRate)*(secs+1)) + 20
		t.Logf("%d queries in %.2f s, %d answered (bound %d)", sent, secs, answered, bound)
		if sent != 1000 || answered == 0 || answered > bound || answered >= sent {
			t.Errorf("sent %d, answered %d in %.2f s; want some answered, at most %d", sent, answered, secs, bound)
		}
		audited(t, "queries over the rate", func(e audit.Entry) bool {
			return e.Proto == "dns" && strings.Contains(e.Reason, "over the sandbox's DNS query rate")
		})
		time.Sleep(1500 * time.Millisecond) // the bucket refills
		if out := run(t, "nslookup", "api.test", "10.83.0.1"); !strings.Contains(out, apiAddr.String()) {
			t.Errorf("DNS after the burst: %s", out)
		}
	})

	t.Run("SYN flood", func(t *testing.T) {
		runtime.GC()
		before := rssBytes(t)
		_, synsBefore := ns.Dropped()
		out := run(t, "rawguest", "synflood", "-n", "20000", "api.test:443")
		if !strings.Contains(out, "synflood sent=20000") {
			t.Fatalf("the flood was not sent:\n%s", out)
		}
		if strings.Contains(out, "ip ") {
			t.Errorf("restoring the guest's address: %s", out)
		}
		_, synsAfter := ns.Dropped()
		t.Logf("%s; %d SYNs dropped over MaxPending", strings.TrimSpace(out[strings.Index(out, "synflood"):]), synsAfter-synsBefore)
		if synsAfter == synsBefore {
			t.Error("the flood never met the bound on handshakes in progress")
		}
		stillServes(t)
		// The gateway's DNS port is a listening socket of the stack's,
		// not a flow the bound on handshakes counts: flooding it must
		// cost as little, and DNS over TCP must work after.
		out = run(t, "rawguest", "synflood", "-n", "20000", "10.83.0.1:53")
		if !strings.Contains(out, "synflood sent=20000") || strings.Contains(out, "ip ") {
			t.Fatalf("the flood to the DNS port:\n%s", out)
		}
		t.Logf("to the DNS port: %s", strings.TrimSpace(out[strings.Index(out, "synflood"):]))
		if out := run(t, "rawguest", "dnstcp"); !strings.Contains(out, "dnstcp a rcode=0 answers=1") {
			t.Errorf("DNS over TCP after the flood:\n%s", out)
		}
		stillServes(t)
		after := rssBytes(t)
		t.Logf("resident set %d MiB before the flood, %d MiB after", before>>20, after>>20)
		if after-before > 200<<20 {
			t.Errorf("the host process grew by %d MiB during the flood", (after-before)>>20)
		}
	})

	t.Run("more connections than the sandbox holds", func(t *testing.T) {
		const conns = 300
		time.Sleep(1500 * time.Millisecond) // denials' rate refills after the floods
		out := run(t, "rawguest", "hold", "-n", strconv.Itoa(conns), "-for", "1s", "hold.test:7000")
		var connected, refused, failed, alive int
		i := strings.Index(out, "hold connected=")
		if i < 0 {
			t.Fatalf("no result:\n%s", out)
		}
		fmt.Sscanf(out[i:], "hold connected=%d refused=%d failed=%d", &connected, &refused, &failed)
		if j := strings.Index(out, "hold alive="); j >= 0 {
			fmt.Sscanf(out[j:], "hold alive=%d", &alive)
		}
		t.Logf("%d connected, %d reset, %d failed otherwise, %d echoed; the upstream held %d at most", connected, refused, failed, alive, hold.peak.Load())
		if connected > maxConns || hold.peak.Load() > maxConns {
			t.Errorf("%d connections open at once (the upstream saw %d); the bound is %d", connected, hold.peak.Load(), maxConns)
		}
		if refused < conns-maxConns || connected+refused != conns {
			t.Errorf("%d refused with a reset and %d failed otherwise; want the %d over the bound reset", refused, failed, conns-maxConns)
		}
		if connected < maxConns-16 || alive != connected {
			t.Errorf("%d connected, %d of them carried a byte each way; want about %d, all", connected, alive, maxConns)
		}
		audited(t, "a connection over MaxConns", func(e audit.Entry) bool {
			return e.Proto == "tcp" && e.Name == "hold.test" && strings.Contains(e.Reason, fmt.Sprintf("over the sandbox's %d open connections", maxConns))
		})
		// Once the guest lets go, the flows are gone.
		deadline := time.Now().Add(20 * time.Second)
		for len(ns.Flows()) > 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if fl := ns.Flows(); len(fl) > 0 {
			t.Errorf("%d flows still open after the guest closed its connections", len(fl))
		}
		stillServes(t)
	})

	// Nothing but the allowed requests reached the upstream, and the
	// network never failed for any frame the guest wrote.
	if got := requests.Load(); got != wantRequests {
		t.Errorf("the upstream got %d requests, want %d", got, wantRequests)
	}
	if err := m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.NetErr(); err != nil {
		t.Errorf("the network failed: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Errorf("closing the network: %v", err)
	}
	entries, err := audit.Tail(auditDir, 50000)
	if err != nil {
		t.Fatal(err)
	}
	probe, lost := false, int64(0)
	for _, e := range entries {
		probe = probe || e.Dst == "169.254.169.254" && e.Port == 81
		lost += e.Dropped
	}
	if !probe && lost == 0 {
		t.Errorf("the probe hidden among refusals is not in the audit log, and nothing there says that "+
			"entries were lost (the network did not report %d refusals); see sandboxnet.Net.denied and netstack's Dropped", hiddenLost)
	}
	if t.Failed() {
		sc := bufio.NewScanner(strings.NewReader(string(m.Console())))
		for sc.Scan() {
			t.Log("console:", sc.Text())
		}
	}
	t.Logf("%d audit entries", len(entries))
}
