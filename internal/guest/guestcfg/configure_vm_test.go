package guestcfg_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/internal/proto/netstream"
)

// The VM test boots the machinetest sandbox (the real Debian kernel and
// busybox under QEMU, TCG here) with the agent built from this tree,
// configures it as the supervisor will, and checks from inside the guest
// and on the wire that the configuration took.

func TestMain(m *testing.M) {
	code := m.Run()
	machinetest.Cleanup()
	os.Exit(code)
}

// gateway is a Network that plays the sandbox network's gateway as far
// as the test needs: it answers ARP for its address, so the guest sends
// its IPv4 packets on, and records the ARP requests and UDP datagrams
// the guest sends. It answers nothing else.
type gateway struct {
	ip  net.IP
	mac net.HardwareAddr

	mu    sync.Mutex
	arps  []string // "SENDER-IP asks for TARGET-IP"
	udp   []string // "SRC -> DST:PORT via DST-MAC"
	nonIP int      // frames of other types
}

func (g *gateway) Serve(ctx context.Context, conn net.Conn) error {
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	r, w := netstream.NewReader(conn), netstream.NewWriter(conn)
	for {
		f, err := r.ReadFrame()
		if err != nil {
			return nil
		}
		if len(f) < 14 {
			continue
		}
		switch binary.BigEndian.Uint16(f[12:]) {
		case 0x0806: // ARP
			if len(f) < 42 || binary.BigEndian.Uint16(f[20:]) != 1 {
				continue
			}
			sha, spa, tpa := net.HardwareAddr(bytes.Clone(f[22:28])), net.IP(bytes.Clone(f[28:32])), net.IP(bytes.Clone(f[38:42]))
			g.record(&g.arps, fmt.Sprintf("%v asks for %v", spa, tpa))
			if tpa.Equal(g.ip) {
				if err := w.WriteFrame(arpReply(g.mac, g.ip, sha, spa)); err != nil {
					return err
				}
			}
		case 0x0800: // IPv4
			ihl := int(f[14]&0x0f) * 4
			if len(f) < 14+ihl+8 || f[23] != 17 {
				continue
			}
			src, dst := net.IP(f[26:30]), net.IP(f[30:34])
			port := binary.BigEndian.Uint16(f[14+ihl+2:])
			g.record(&g.udp, fmt.Sprintf("%v -> %v:%d via %v", src, dst, port, net.HardwareAddr(f[0:6])))
		default:
			g.mu.Lock()
			g.nonIP++
			g.mu.Unlock()
		}
	}
}

func (g *gateway) record(list *[]string, s string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(*list) < 1000 {
		*list = append(*list, s)
	}
}

// saw waits (bounded) until list holds want.
func (g *gateway) saw(t *testing.T, list *[]string, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		g.mu.Lock()
		got := strings.Join(*list, "\n")
		g.mu.Unlock()
		if strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the network did not see %q; it saw:\n%s", want, got)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func arpReply(mac net.HardwareAddr, ip net.IP, toMAC net.HardwareAddr, toIP net.IP) []byte {
	f := make([]byte, 60)
	copy(f[0:6], toMAC)
	copy(f[6:12], mac)
	binary.BigEndian.PutUint16(f[12:], 0x0806)
	binary.BigEndian.PutUint16(f[14:], 1)      // Ethernet
	binary.BigEndian.PutUint16(f[16:], 0x0800) // IPv4
	f[18], f[19] = 6, 4
	binary.BigEndian.PutUint16(f[20:], 2) // reply
	copy(f[22:28], mac)
	copy(f[28:32], ip.To4())
	copy(f[32:38], toMAC)
	copy(f[38:42], toIP.To4())
	return f
}

// guestRun runs a command in the guest and returns its stdout; another
// exit than want, or stderr, fails the test.
func guestRun(t *testing.T, m *machine.Machine, cmd guestconn.Cmd, want int) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := m.Exec(ctx, cmd)
	if err != nil {
		t.Fatalf("%q: %v", cmd.Args, err)
	}
	if st.Code != want {
		t.Fatalf("%q: %v, stdout %q, stderr %q; want exit %d", cmd.Args, st, stdout.String(), stderr.String(), want)
	}
	return stdout.String()
}

func guestFile(t *testing.T, m *machine.Machine, path string) (string, *guestconn.FileInfo) {
	t.Helper()
	var b bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fi, err := m.Get(ctx, path, &b)
	if err != nil {
		t.Fatalf("get %s: %v", path, err)
	}
	return b.String(), fi
}

func envOf(out string) map[string]string {
	env := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

func TestConfigureVM(t *testing.T) {
	_, cfg, img := machinetest.Require(t)
	gw := &gateway{ip: net.IPv4(10, 83, 0, 1).To4(), mac: net.HardwareAddr{0x02, 0x53, 0x42, 0x58, 0x00, 0x01}}
	sb := cfg.Sandboxes[machinetest.Sandbox]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	boot, err := pipeline.BootFiles(img)
	if err != nil {
		t.Fatal(err)
	}
	m, err := machine.Start(ctx, machine.Options{Name: sb.Name, Boot: boot, CPUs: sb.CPUs, Memory: sb.Memory, Network: gw})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	root := guestconn.Cmd{User: "root"}
	cmd := func(c guestconn.Cmd, args ...string) guestconn.Cmd { c.Args = args; return c }

	if !m.Client().Guest().Has(agentproto.CapConfigure) {
		t.Fatalf("the agent's hello %+v does not announce %q", m.Client().Guest(), agentproto.CapConfigure)
	}
	if s := strings.TrimSpace(guestRun(t, m, cmd(root, "cat", "/sys/class/net/eth0/operstate"), 0)); s != "down" {
		t.Errorf("eth0 is %q before the configure request; want down", s)
	}
	mac := strings.TrimSpace(guestRun(t, m, cmd(root, "cat", "/sys/class/net/eth0/address"), 0))

	ca := testCA(t, "sbx test CA")
	placeholder := "sbx-placeholder-3f9c2a7e51d04b68"
	conf := agentproto.Configure{
		Net:       &agentproto.NetConfig{Interface: mac, Addr: "10.83.0.2/24", Gateway: "10.83.0.1", DNS: "10.84.0.53", MTU: 1400},
		CACertPEM: ca,
		Env:       []string{"ANTHROPIC_API_KEY=" + placeholder},
		Hosts:     []string{"10.83.0.7 api.example.test"},
	}
	start := time.Now()
	if err := m.Client().Configure(ctx, conf); err != nil {
		t.Fatal(err)
	}
	t.Logf("configured in %v", time.Since(start).Round(time.Millisecond))

	t.Run("interface", func(t *testing.T) {
		if s := strings.TrimSpace(guestRun(t, m, cmd(root, "cat", "/sys/class/net/eth0/operstate"), 0)); s != "up" {
			t.Errorf("eth0 is %q; want up", s)
		}
		if s := strings.TrimSpace(guestRun(t, m, cmd(root, "cat", "/sys/class/net/eth0/mtu"), 0)); s != "1400" {
			t.Errorf("eth0's MTU is %s; want 1400", s)
		}
		if s := strings.TrimSpace(guestRun(t, m, cmd(root, "cat", "/sys/class/net/lo/operstate"), 0)); s != "unknown" && s != "up" {
			t.Errorf("lo is %q; want it up", s)
		}
		fib := guestRun(t, m, cmd(root, "cat", "/proc/net/fib_trie"), 0)
		if !strings.Contains(fib, "10.83.0.2\n") || !strings.Contains(fib, "127.0.0.1\n") {
			t.Errorf("/proc/net/fib_trie has no local 10.83.0.2 or 127.0.0.1:\n%s", fib)
		}
		route := guestRun(t, m, cmd(root, "cat", "/proc/net/route"), 0)
		// Default route: destination 0, gateway 10.83.0.1 (host byte
		// order), on eth0.
		if !strings.Contains(route, "eth0\t00000000\t0100530A\t") {
			t.Errorf("/proc/net/route has no default route via 10.83.0.1 on eth0:\n%s", route)
		}
	})

	t.Run("files", func(t *testing.T) {
		resolv, _ := guestFile(t, m, "/etc/resolv.conf")
		if !strings.Contains(resolv, "\nnameserver 10.84.0.53\noptions timeout:2 attempts:2\n") {
			t.Errorf("/etc/resolv.conf:\n%s", resolv)
		}
		hosts, _ := guestFile(t, m, "/etc/hosts")
		for _, want := range []string{"127.0.0.1\tlocalhost\n", "127.0.1.1\t" + sb.Name + "\n", "10.83.0.7 api.example.test\n"} {
			if !strings.Contains(hosts, want) {
				t.Errorf("/etc/hosts has no %q:\n%s", want, hosts)
			}
		}
		got, fi := guestFile(t, m, agentproto.CACertPath)
		if got != string(ca) || fi.Mode != 0o644 || fi.UID != 0 {
			t.Errorf("%s: mode %v uid %d, content %q; want the CA, 0644, root's", agentproto.CACertPath, fi.Mode, fi.UID, got)
		}
		bundle, _ := guestFile(t, m, agentproto.CABundlePath)
		if n := strings.Count(bundle, string(ca)); n != 1 {
			t.Errorf("the bundle holds the CA %d times, want once", n)
		}
	})

	t.Run("env", func(t *testing.T) {
		for _, user := range []string{"root", machinetest.User} {
			env := envOf(guestRun(t, m, guestconn.Cmd{User: user, Args: []string{"env"}}, 0))
			want := map[string]string{
				"SSL_CERT_FILE": agentproto.CABundlePath, "CURL_CA_BUNDLE": agentproto.CABundlePath,
				"REQUESTS_CA_BUNDLE": agentproto.CABundlePath, "GIT_SSL_CAINFO": agentproto.CABundlePath,
				"NODE_EXTRA_CA_CERTS": agentproto.CACertPath, "ANTHROPIC_API_KEY": placeholder,
			}
			for k, v := range want {
				if env[k] != v {
					t.Errorf("as %s: %s=%q, want %q", user, k, env[k], v)
				}
			}
			if env["PATH"] == "" || env["HOME"] == "" {
				t.Errorf("as %s: the user's defaults are gone: %v", user, env)
			}
		}
		// An exec's own Env still wins (the supervisor, not the agent,
		// refuses a client's override of a placeholder).
		env := envOf(guestRun(t, m, guestconn.Cmd{Args: []string{"env"}, Env: []string{"ANTHROPIC_API_KEY=mine"}}, 0))
		if env["ANTHROPIC_API_KEY"] != "mine" {
			t.Errorf("an exec's own Env did not override the default: %q", env["ANTHROPIC_API_KEY"])
		}
	})

	t.Run("wire", func(t *testing.T) {
		// The resolver the configuration named, through the default
		// route: the query goes to the gateway's MAC address, for
		// 10.84.0.53, which is not on eth0's network.
		st, err := m.Exec(ctx, guestconn.Cmd{Args: []string{"nslookup", "-timeout=1", "-retry=1", "anything.example.test"}})
		if err != nil {
			t.Fatal(err)
		}
		if st.Success() {
			t.Error("nslookup succeeded against a resolver that answers nothing")
		}
		gw.saw(t, &gw.arps, "10.83.0.2 asks for 10.83.0.1")
		gw.saw(t, &gw.udp, "10.83.0.2 -> 10.84.0.53:53 via "+gw.mac.String())
	})

	t.Run("again", func(t *testing.T) {
		// A second request: same CA, another placeholder, no hosts
		// lines. The bundle still holds the CA once; the old
		// placeholder is gone.
		conf.Env = []string{"OPENAI_API_KEY=sbx-placeholder-new"}
		conf.Hosts = nil
		if err := m.Client().Configure(ctx, conf); err != nil {
			t.Fatal(err)
		}
		bundle, _ := guestFile(t, m, agentproto.CABundlePath)
		if n := strings.Count(bundle, string(ca)); n != 1 {
			t.Errorf("after a second configure the bundle holds the CA %d times, want once", n)
		}
		env := envOf(guestRun(t, m, guestconn.Cmd{Args: []string{"env"}}, 0))
		if _, ok := env["ANTHROPIC_API_KEY"]; ok || env["OPENAI_API_KEY"] != "sbx-placeholder-new" {
			t.Errorf("after a second configure: ANTHROPIC_API_KEY %q, OPENAI_API_KEY %q", env["ANTHROPIC_API_KEY"], env["OPENAI_API_KEY"])
		}
		if hosts, _ := guestFile(t, m, "/etc/hosts"); strings.Contains(hosts, "api.example.test") {
			t.Errorf("the first request's hosts line stayed:\n%s", hosts)
		}
		// A request the guest cannot apply is an error from the guest,
		// and the agent serves on.
		bad := agentproto.Configure{Net: &agentproto.NetConfig{Interface: "eth7", Addr: "10.83.0.2/24"}}
		err := m.Client().Configure(ctx, bad)
		if err == nil || !strings.Contains(err.Error(), "no interface eth7") {
			t.Errorf("configuring a missing interface: %v", err)
		}
		if out := guestRun(t, m, cmd(root, "cat", "/sys/class/net/eth0/operstate"), 0); strings.TrimSpace(out) != "up" {
			t.Errorf("eth0 is %q after a failed configure", out)
		}
	})
}
