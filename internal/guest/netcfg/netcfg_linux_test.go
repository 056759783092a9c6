//go:build linux

package netcfg_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/guest/netcfg"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"golang.org/x/sys/unix"
)

// inNetns runs fn on a thread of its own in a new, empty network
// namespace, so nothing the test does reaches the host's interfaces. The
// thread is never unlocked: it ends with the goroutine instead of going
// back to the scheduler in the wrong namespace.
func inNetns(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if err = unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return
		}
		fn()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the test in its network namespace did not end within a minute")
	}
	if err != nil {
		t.Fatalf("unshare(CLONE_NEWNET): %v (the test runs as root)", err)
	}
}

// tap makes a tap device in the calling thread's namespace and keeps it
// open, so its carrier is up as a virtio-net device's is.
func tap(t *testing.T, name string) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("opening /dev/net/tun: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		t.Fatal(err)
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		t.Fatalf("TUNSETIFF %s: %v", name, err)
	}
}

// state is what the kernel says of an interface, read with the standard
// library and /proc rather than with netcfg's own code.
type state struct {
	up    bool
	mtu   int
	addrs []string
	route string // the default route: "GATEWAY dev NAME", or ""
}

func read(t *testing.T, name string) state {
	t.Helper()
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	s := state{up: ifi.Flags&net.FlagUp != 0, mtu: ifi.MTU}
	addrs, err := ifi.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ip, _, _ := net.ParseCIDR(a.String()); ip.To4() != nil {
			s.addrs = append(s.addrs, a.String())
		}
	}
	// /proc/thread-self/net is this thread's namespace (/proc/net is
	// the process's).
	b, err := os.ReadFile("/proc/thread-self/net/route")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) >= 8 && f[1] == "00000000" && f[7] == "00000000" {
			var gw [4]byte
			fmt.Sscanf(f[2], "%02x%02x%02x%02x", &gw[3], &gw[2], &gw[1], &gw[0])
			s.route = net.IP(gw[:]).String() + " dev " + f[0]
		}
	}
	return s
}

func TestApply(t *testing.T) {
	inNetns(t, func() {
		tap(t, "eth0")
		tap(t, "eth1")
		if s := read(t, "lo"); s.up {
			t.Fatal("lo is up in a new namespace: not a fresh namespace")
		}
		ctx := context.Background()
		nc := agentproto.NetConfig{Interface: "eth0", Addr: "10.83.0.2/24", Gateway: "10.83.0.1", DNS: "10.83.0.1", MTU: 1400}
		if err := netcfg.Apply(ctx, nc, netcfg.Options{}); err != nil {
			t.Fatal(err)
		}
		lo := read(t, "lo")
		if !lo.up || strings.Join(lo.addrs, " ") != "127.0.0.1/8" {
			t.Errorf("lo: %+v, want up with 127.0.0.1/8", lo)
		}
		got := read(t, "eth0")
		want := state{up: true, mtu: 1400, addrs: []string{"10.83.0.2/24"}, route: "10.83.0.1 dev eth0"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("eth0 after the first Apply: %+v, want %+v", got, want)
		}
		if eth1 := read(t, "eth1"); eth1.up || len(eth1.addrs) > 0 {
			t.Errorf("eth1, which nothing named, was changed: %+v", eth1)
		}

		// The same again changes nothing and fails on nothing.
		if err := netcfg.Apply(ctx, nc, netcfg.Options{}); err != nil {
			t.Fatalf("applying the same configuration again: %v", err)
		}
		if got := read(t, "eth0"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("eth0 after the same Apply again: %+v, want %+v", got, want)
		}

		// Another configuration, naming eth1 by its MAC address, and
		// moving the default route there.
		ifi, err := net.InterfaceByName("eth1")
		if err != nil {
			t.Fatal(err)
		}
		nc = agentproto.NetConfig{Interface: ifi.HardwareAddr.String(), Addr: "10.84.0.5/16", Gateway: "10.84.255.254"}
		if err := netcfg.Apply(ctx, nc, netcfg.Options{}); err != nil {
			t.Fatal(err)
		}
		got = read(t, "eth1")
		want = state{up: true, mtu: 1500, addrs: []string{"10.84.0.5/16"}, route: "10.84.255.254 dev eth1"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("eth1 named by MAC: %+v, want %+v", got, want)
		}

		// A new address on the same interface replaces the old one.
		nc.Addr = "10.84.1.9/16"
		if err := netcfg.Apply(ctx, nc, netcfg.Options{}); err != nil {
			t.Fatal(err)
		}
		if got := read(t, "eth1"); strings.Join(got.addrs, " ") != "10.84.1.9/16" {
			t.Errorf("eth1's addresses after a new one: %v, want 10.84.1.9/16 alone", got.addrs)
		}

		// No gateway: no default route.
		nc.Gateway = ""
		if err := netcfg.Apply(ctx, nc, netcfg.Options{}); err != nil {
			t.Fatal(err)
		}
		if got := read(t, "eth1"); got.route != "" {
			t.Errorf("a default route %q remains after a configuration without a gateway", got.route)
		}
	})
}

func TestApplyMissingInterface(t *testing.T) {
	inNetns(t, func() {
		tap(t, "eth0")
		start := time.Now()
		err := netcfg.Apply(context.Background(), agentproto.NetConfig{Interface: "eth9", Addr: "10.83.0.2/24"}, netcfg.Options{LinkWait: 300 * time.Millisecond})
		if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "no interface eth9 within 300ms") || !strings.Contains(err.Error(), "eth0") {
			t.Errorf("Apply for a missing interface: %v; want an error naming it and the interfaces there are", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Apply waited %v for a missing interface, beyond its 300ms", d)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err = netcfg.Apply(ctx, agentproto.NetConfig{Interface: "52:54:00:00:00:99", Addr: "10.83.0.2/24"}, netcfg.Options{LinkWait: time.Hour})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Apply whose context ends while it waits: %v", err)
		}
	})
}

// TestApplyRefusesBadConfig: a malformed configuration changes nothing.
func TestApplyRefusesBadConfig(t *testing.T) {
	inNetns(t, func() {
		tap(t, "eth0")
		for _, nc := range []agentproto.NetConfig{
			{Interface: "eth0", Addr: "10.83.0.2"},
			{Interface: "eth0", Addr: "10.83.0.2/24", Gateway: "10.99.0.1"},
			{Interface: "eth0", Addr: "127.0.0.2/8"},
			{Interface: "eth0", Addr: "10.83.0.2/24", MTU: 20},
			{Interface: "../eth0", Addr: "10.83.0.2/24"},
		} {
			if err := netcfg.Apply(context.Background(), nc, netcfg.Options{}); err == nil {
				t.Errorf("Apply(%+v) succeeded", nc)
			}
		}
		if s := read(t, "eth0"); s.up || len(s.addrs) > 0 {
			t.Errorf("eth0 was changed by refused configurations: %+v", s)
		}
	})
}

func TestApplyIPv6(t *testing.T) {
	inNetns(t, func() {
		tap(t, "eth0")
		nc := agentproto.NetConfig{Interface: "eth0", Addr: "fd00:83::2/64", Gateway: "fd00:83::1", MTU: 1400}
		if err := netcfg.Apply(context.Background(), nc, netcfg.Options{}); err != nil {
			t.Fatal(err)
		}
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			t.Fatal(err)
		}
		addrs, _ := ifi.Addrs()
		var got []string
		for _, a := range addrs {
			got = append(got, a.String())
		}
		if !strings.Contains(strings.Join(got, " "), "fd00:83::2/64") {
			t.Errorf("eth0's addresses: %v; want fd00:83::2/64", got)
		}
		b, err := os.ReadFile("/proc/thread-self/net/ipv6_route")
		if err != nil {
			t.Fatal(err)
		}
		// Destination ::/0 via fd00:83::1 on eth0.
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 10 && f[0] == strings.Repeat("0", 32) && f[1] == "00" && f[4] == "fd000083000000000000000000000001" && f[9] == "eth0" {
				found = true
			}
		}
		if !found {
			t.Errorf("no default route via fd00:83::1 on eth0:\n%s", b)
		}
	})
}
