package machine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/proto/netstream"
)

// attempt runs a command as root and returns its status and output.
func attempt(t *testing.T, m *machine.Machine, args ...string) (*guestconn.ExitStatus, string) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := m.Exec(ctx, guestconn.Cmd{Args: args, User: "root", Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return st, out.String()
}

// guestNumber reads a number from a file in the guest.
func guestNumber(t *testing.T, m *machine.Machine, path string) uint64 {
	t.Helper()
	out := run(t, m, "", 0, "cat", path)
	n, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("%s: %q: %v", path, out, err)
	}
	return n
}

// configure does what a guest would to reach the host: it brings eth0 up
// with the address and route of the sandbox network.
func configure(t *testing.T, m *machine.Machine) {
	t.Helper()
	run(t, m, "root", 0, "ip", "link", "set", "eth0", "up")
	run(t, m, "root", 0, "ip", "addr", "flush", "dev", "eth0")
	run(t, m, "root", 0, "ip", "addr", "add", "10.0.2.15/24", "dev", "eth0")
	run(t, m, "root", 0, "ip", "route", "replace", "default", "via", "10.0.2.2")
}

// networkSealed is a hostile root guest trying to get out through its
// network device, which leads to the default Sink: the device is there
// and attached to the host, every frame it sends reaches the host and is
// dropped there, and nothing ever comes back.
func networkSealed(t *testing.T, m *machine.Machine) {
	if out := run(t, m, "", 0, "ls", "/sys/class/net"); strings.Join(strings.Fields(out), " ") != "eth0 lo" {
		t.Fatalf("the guest's network interfaces are %q, want eth0 and lo only", out)
	}
	if out := run(t, m, "", 0, "readlink", "/sys/class/net/eth0/device/driver"); !strings.HasSuffix(strings.TrimSpace(out), "/virtio_net") {
		t.Fatalf("eth0's driver is %q, want virtio_net", out)
	}
	configure(t, m)

	t.Run("attempts", func(t *testing.T) {
		for _, c := range []struct {
			name   string
			args   []string
			want   string // in the output, saying why it failed
			signal string // what ends it, if not its own exit
		}{
			{"icmp-gateway", []string{"ping", "-c", "3", "-W", "1", "10.0.2.2"}, "3 packets transmitted, 0 packets received", ""},
			{"icmp-internet", []string{"ping", "-c", "2", "-W", "1", "1.1.1.1"}, "2 packets transmitted, 0 packets received", ""},
			{"arp", []string{"arping", "-c", "2", "-w", "3", "-I", "eth0", "10.0.2.2"}, "Received 0 response", ""},
			{"tcp-gateway", []string{"nc", "-w", "3", "10.0.2.2", "80"}, "nc: timed out", ""},
			{"tcp-internet", []string{"nc", "-w", "3", "1.1.1.1", "443"}, "nc: timed out", ""},
			// A connect that gets no answer waits for TCP's own timeout
			// (minutes), and Debian's busybox 1.35 wget crashes on -T:
			// timeout ends it.
			{"http", []string{"timeout", "4", "wget", "-O", "/dev/null", "http://1.1.1.1/"}, "Connecting to 1.1.1.1 (1.1.1.1:80)\n", "SIGTERM"},
			{"dns-udp", []string{"nslookup", "-timeout=2", "-retry=1", "api.example.com", "10.0.2.2"}, "no servers could be reached", ""},
			{"dhcp", []string{"udhcpc", "-f", "-n", "-q", "-t", "2", "-T", "1", "-i", "eth0", "-s", "/bin/true"}, "no lease", ""},
		} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				st, out := attempt(t, m, c.args...)
				t.Logf("%q: %v\n%s", c.args, st, out)
				if st.Success() {
					t.Errorf("%q succeeded; the guest must reach nothing", c.args)
				}
				if st.Signal != c.signal || st.Code == 127 || strings.Contains(out, "applet not found") ||
					strings.Contains(out, "Usage:") || !strings.Contains(out, c.want) {
					t.Errorf("%q failed for another reason than the network (%v; want %q in the output)", c.args, st, c.want)
				}
			})
		}
	})

	// Nothing came back; everything the guest sent reached the host.
	if rx := guestNumber(t, m, "/sys/class/net/eth0/statistics/rx_packets"); rx != 0 {
		t.Errorf("eth0 received %d packets; the host must send none", rx)
	}
	tx := guestNumber(t, m, "/sys/class/net/eth0/statistics/tx_packets")
	if tx == 0 {
		t.Fatal("eth0 sent nothing: the attempts never reached the device")
	}
	var got machine.NetStats
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got = m.NetStats(); got.Frames >= tx {
			break
		}
	}
	t.Logf("the guest sent %d packets; the host's sink read and dropped %d frames, %d bytes", tx, got.Frames, got.Bytes)
	if got.Frames < tx || got.Bytes < 42*got.Frames {
		t.Errorf("the sink read %+v; want at least the %d frames the guest sent, of 42 bytes or more", got, tx)
	}
	if err := m.NetErr(); err != nil {
		t.Errorf("NetErr = %v", err)
	}
}

// arpWatcher is a Network that reads the guest's frames, answers none,
// and reports the first frame and the first ARP request for a watched
// address.
type arpWatcher struct {
	target   net.IP
	first    chan []byte
	request  chan []byte
	returned chan error
}

func (a *arpWatcher) Serve(ctx context.Context, conn net.Conn) (err error) {
	defer func() { a.returned <- err }()
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	r := netstream.NewReader(conn)
	for n := 0; ; n++ {
		f, err := r.ReadFrame()
		if err != nil {
			return err
		}
		f = bytes.Clone(f)
		if n == 0 {
			a.first <- f
		}
		// Ethernet, then ARP for IPv4 over Ethernet: op at 20, the
		// target protocol address at 38.
		if len(f) >= 42 && binary.BigEndian.Uint16(f[12:]) == 0x0806 &&
			binary.BigEndian.Uint16(f[20:]) == 1 && net.IP(f[38:42]).Equal(a.target) {
			select {
			case a.request <- f:
			default:
			}
		}
	}
}

// TestNetworkBackend boots a machine whose network device is served by
// the test's own Network: the guest's frames reach it, starting at the
// first, and Stop ends its Serve.
func TestNetworkBackend(t *testing.T) {
	t.Parallel()
	w := &arpWatcher{
		target: net.IPv4(10, 0, 2, 2), first: make(chan []byte, 1),
		request: make(chan []byte, 1), returned: make(chan error, 1),
	}
	m := start(t, machine.Options{Network: w})
	select {
	case f := <-w.first:
		t.Fatalf("a frame (% x) before eth0 was up", f)
	default:
	}
	mac, err := net.ParseMAC(strings.TrimSpace(run(t, m, "", 0, "cat", "/sys/class/net/eth0/address")))
	if err != nil {
		t.Fatal(err)
	}
	configure(t, m)
	if st, out := attempt(t, m, "arping", "-c", "1", "-w", "1", "-I", "eth0", "10.0.2.2"); st.Success() {
		t.Errorf("arping got an answer from a Network that sends nothing: %s", out)
	}

	select {
	case f := <-w.first:
		typ := binary.BigEndian.Uint16(f[12:])
		t.Logf("the first frame: %d bytes, ethertype %#04x, from %v", len(f), typ, net.HardwareAddr(f[6:12]))
		if !bytes.Equal(f[6:12], mac) {
			t.Errorf("the first frame is from %v, not from eth0 (%v)", net.HardwareAddr(f[6:12]), mac)
		}
		if typ != 0x0806 && typ != 0x0800 && typ != 0x86dd {
			t.Errorf("the first frame's ethertype is %#04x, not ARP, IPv4 or IPv6", typ)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Network read no frame")
	}
	select {
	case f := <-w.request:
		if !bytes.Equal(f[22:28], mac) || !net.IP(f[28:32]).Equal(net.IPv4(10, 0, 2, 15)) {
			t.Errorf("the ARP request for 10.0.2.2 is from %v at %v, want eth0 (%v) at 10.0.2.15",
				net.HardwareAddr(f[22:28]), net.IP(f[28:32]), mac)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no ARP request for 10.0.2.2 reached the Network")
	}
	if s := m.NetStats(); s != (machine.NetStats{}) {
		t.Errorf("NetStats = %+v for a Network that counts nothing", s)
	}

	if err := m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-w.returned:
		t.Logf("Serve returned %v", err)
	default:
		t.Error("the Network's Serve was still running after Stop")
	}
	if err := m.NetErr(); err != nil {
		t.Errorf("NetErr after Stop = %v", err)
	}
}
