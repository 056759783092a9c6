package netstack_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/netstack"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/pipeline"
)

func TestMain(m *testing.M) {
	code := m.Run()
	machinetest.Cleanup()
	os.Exit(code)
}

// httpHandle answers one HTTP/1.0-style request per flow: "/big" with
// bigSize bytes, anything else with a line naming the flow's name.
func httpHandle(ctx context.Context, f netstack.Flow, conn net.Conn) {
	conn.SetDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(io.LimitReader(conn, 8<<10))
	line, err := r.ReadString('\n')
	if err != nil {
		return
	}
	for {
		h, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if h == "\r\n" || h == "\n" {
			break
		}
	}
	if strings.HasPrefix(line, "GET /big ") {
		fmt.Fprintf(conn, "HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n", bigSize)
		chunk := bytes.Repeat([]byte("sbx!"), 16<<10)
		for sent := 0; sent < bigSize; sent += len(chunk) {
			if _, err := conn.Write(chunk); err != nil {
				return
			}
		}
		return
	}
	body := "hello from " + f.Name + "\n"
	fmt.Fprintf(conn, "HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

const bigSize = 32 << 20

// TestLinuxGuest boots a real guest (Linux, busybox) whose network device
// the Network serves, and plays the policy from inside it with the
// guest's own tools: DNS, HTTP to an allowed name, the refusals, and a
// download for throughput.
func TestLinuxGuest(t *testing.T) {
	_, cfg, img := machinetest.Require(t)
	var mu sync.Mutex
	var denials []netstack.Denial
	n, err := netstack.New(netstack.Options{
		Resolve: func(name string) bool { return name == "api.test" || name == "other.test" },
		Accept:  func(name string, port uint16) bool { return name == "api.test" && port == 80 },
		Handle:  httpHandle,
		Deny: func(d netstack.Denial) {
			mu.Lock()
			denials = append(denials, d)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	sb := cfg.Sandboxes[machinetest.Sandbox]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	boot, err := pipeline.BootFiles(img)
	if err != nil {
		t.Fatal(err)
	}
	m, err := machine.Start(ctx, machine.Options{
		Name: sb.Name, Boot: boot, CPUs: sb.CPUs, Memory: sb.Memory, Network: n,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(context.Background())

	gc := n.GuestConfig()
	sh(t, m, 0, fmt.Sprintf("ip link set eth0 up mtu %d && ip addr add %s dev eth0 && ip route add default via %s && echo nameserver %s > /etc/resolv.conf",
		gc.MTU, gc.Addr, gc.Gateway, gc.DNS))

	sh(t, m, 0, "ping -c 1 -W 5 "+gc.Gateway.String())
	out := sh(t, m, 0, "nslookup api.test "+gc.DNS.String())
	addr := ""
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "198.1") {
			addr = f
		}
	}
	if addr == "" {
		t.Fatalf("nslookup api.test: no synthetic address in %q", out)
	}
	if out := sh(t, m, 0, "wget -q -O - http://api.test/"); out != "hello from api.test\n" {
		t.Errorf("wget http://api.test/: %q", out)
	}

	for _, c := range []struct{ cmd, want string }{
		{"nslookup evil.test " + gc.DNS.String(), "NXDOMAIN"},
		{"nslookup -type=txt api.test " + gc.DNS.String(), "REFUSED"},
		{"nc -w 5 " + addr + " 22 </dev/null", "refused"},
		{"nc -w 5 169.254.169.254 80 </dev/null", "refused"},
		{"nc -w 5 1.1.1.1 443 </dev/null", "refused"},
		{"wget -q -O - http://other.test/", "refused"},
		{"ping -c 1 -W 2 1.1.1.1", "0 packets received"},
		{"nslookup -timeout=2 -retry=1 api.test 8.8.8.8", "no servers could be reached"},
	} {
		start := time.Now()
		out := sh(t, m, -1, c.cmd)
		took := time.Since(start)
		if !strings.Contains(strings.ToLower(out), strings.ToLower(c.want)) {
			t.Errorf("%s: %q; want %q in it", c.cmd, out, c.want)
		}
		if c.want == "refused" && took > 3*time.Second {
			t.Errorf("%s took %v to be refused", c.cmd, took)
		}
	}

	start := time.Now()
	out = sh(t, m, 0, "wget -q -O - http://api.test/big | wc -c")
	took := time.Since(start)
	if strings.TrimSpace(out) != fmt.Sprint(bigSize) {
		t.Errorf("downloaded %q bytes, want %d", out, bigSize)
	}
	t.Logf("%d MiB from Handle to the guest in %v (%.1f MB/s, TCG guest, %s)", bigSize>>20, took.Round(time.Millisecond),
		float64(bigSize)/took.Seconds()/1e6, m.Accel())

	mu.Lock()
	got := append([]netstack.Denial(nil), denials...)
	mu.Unlock()
	for _, want := range []struct{ proto, name string }{{"dns", "evil.test"}, {"dns", "api.test"}, {"tcp", "api.test"}, {"tcp", "other.test"}, {"tcp", ""}, {"ip", ""}, {"udp", ""}} {
		found := false
		for _, d := range got {
			found = found || d.Proto == want.proto && d.Name == want.name
		}
		if !found {
			t.Errorf("no %s denial for %q among %+v", want.proto, want.name, got)
		}
	}
	if st := n.Stats(); st.Frames == 0 || m.NetStats() != st {
		t.Errorf("Stats %+v, machine's NetStats %+v", st, m.NetStats())
	}
	if err := m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.NetErr(); err != nil {
		t.Errorf("NetErr = %v", err)
	}
	if fl := n.Flows(); len(fl) != 0 {
		t.Errorf("flows after Stop: %+v", fl)
	}
}

// sh runs a shell command as root in the guest and returns its output,
// stdout and stderr together; want -1 takes any exit status.
func sh(t *testing.T, m *machine.Machine, want int, cmd string) string {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := m.Exec(ctx, guestconn.Cmd{Args: []string{"sh", "-c", cmd + " 2>&1"}, User: "root", Stdout: &out})
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	if want >= 0 && st.Code != want {
		t.Fatalf("%s: %v, output %q; want exit %d", cmd, st, out.String(), want)
	}
	return out.String()
}
