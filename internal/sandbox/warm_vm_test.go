package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/internal/snapshot"
	"github.com/sbx-dev/sbx/policy"
)

// TestWarmStarts: the first start of a shape saves a machine and resumes
// from it; two more resume from it at once, each with its own host name,
// clock, random numbers, placeholder, mount and policy — the narrower one
// cannot reach what only the wider allows. No secret or placeholder is
// in the snapshot's files. A corrupted snapshot is refused and the
// sandbox boots cold, and a start interrupted while it resumes leaves no
// QEMU behind.
func TestWarmStarts(t *testing.T) {
	_, _, img := machinetest.Require(t)
	si, err := pipeline.SandboxImage(img)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := snapshot.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	auth, err := ca.New()
	if err != nil {
		t.Fatal(err)
	}
	mdir, err := os.MkdirTemp("", "sbx-warm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(mdir)

	// A TCP service on the host that only the wider policy reaches.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("reached\n"))
			c.Close()
		}
	}()
	const secret = "sk-warm-secret-0123456789abcdef"
	narrow := policy.Sandbox{
		Hosts:   []policy.HostMapping{{Name: "svc.test", Addr: ln.Addr().String()}},
		Secrets: []policy.SecretBinding{{Name: "key", Env: "KEY", Hosts: []policy.HostPattern{policy.MustHostPattern("api.test")}, Source: "env:KEY"}},
	}
	wide := narrow
	wide.TCP = []policy.TCPRule{{Dest: policy.HostPort{Host: "svc.test", Port: 7000}}}

	// The host of warm-b sleeps an hour (slept.Store) while it runs:
	// its guest's clock is set again.
	var slept atomic.Int64
	opts := func(name string, c *snapshot.Cache) sandbox.Options {
		o := sandbox.Options{Dir: mdir, CA: auth, Secrets: map[string][]byte{"key": []byte(secret)}, Snapshots: c, ClockCheck: 100 * time.Millisecond}
		if name == "warm-b" {
			sandbox.SetClockDrift(&o, func() time.Duration { return time.Duration(slept.Load()) })
		}
		return o
	}
	type started struct {
		sb   *sandbox.Sandbox
		host string
	}
	start := func(ctx context.Context, name string, p policy.Sandbox, c *snapshot.Cache) (started, error) {
		host := t.TempDir()
		if err := os.WriteFile(filepath.Join(host, "whose"), []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		mount := policy.Mount{Guest: "/workspace", Host: host, Access: policy.ReadWrite, Owner: machinetest.User}
		p.Mounts = []policy.Mount{mount}
		sb, err := sandbox.Start(ctx, sandbox.Spec{
			Name: name, Image: si, Memory: 512 << 20, Policy: p,
			Mounts: []sandboxfs.Mount{{Policy: mount, HostDir: host, UID: machinetest.UID, GID: machinetest.UID}},
		}, opts(name, c))
		if err == nil {
			t.Cleanup(func() { sb.Stop(context.Background()) })
		}
		return started{sb, host}, err
	}
	run := func(sb *sandbox.Sandbox, user, script string) (string, int) {
		t.Helper()
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		st, err := sb.Exec(ctx, guestconn.Cmd{Args: []string{"sh", "-c", script}, User: user, Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatalf("%q: %v", script, err)
		}
		return out.String(), st.Code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	first, err := start(ctx, "warm-a", wide, cache)
	if err != nil {
		t.Fatal(err)
	}
	if st := first.sb.Started(); st.How != sandbox.Saved || st.Warning != "" {
		t.Fatalf("the first start: %+v, want a saved machine resumed", st)
	}
	t.Logf("first start (boot, save, resume): %v", first.sb.Started().Took)

	var two [2]started
	var wg sync.WaitGroup
	for i, p := range []policy.Sandbox{narrow, wide} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if two[i], err = start(ctx, []string{"warm-b", "warm-c"}[i], p, cache); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	guestClock := func(sb *sandbox.Sandbox) (guest, before, after time.Time) {
		t.Helper()
		before = time.Now().Truncate(time.Second)
		out, _ := run(sb, "root", "busybox date -u +%s")
		after = time.Now()
		sec, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if err != nil {
			t.Fatalf("the guest's clock: %q", out)
		}
		return time.Unix(sec, 0), before, after
	}
	random := map[string]bool{}
	var placeholders []string
	for i, s := range two {
		sb := s.sb
		name := sb.Spec().Name
		if st := sb.Started(); st.How != sandbox.Warm || st.Warning != "" {
			t.Errorf("%s: %+v, want warm", name, st)
		}
		t.Logf("%s started in %v", name, sb.Started().Took)
		if out, _ := run(sb, machinetest.User, "hostname; grep 127.0.1.1 /etc/hosts; cat /workspace/whose"); out != name+"\n127.0.1.1\t"+name+"\n"+name+"\n" {
			t.Errorf("%s: host name, hosts line and mount: %q", name, out)
		}
		out, _ := run(sb, "root", "head -c 32 /dev/urandom | sha256sum")
		random[out] = true
		// The guest's clock is the host's, to the second the guest's
		// date shows and a second more.
		if g, before, after := guestClock(sb); g.Before(before.Add(-time.Second)) || g.After(after.Add(time.Second)) {
			t.Errorf("%s: the guest's clock reads %v; the host's was %v to %v", name, g, before, after)
		}
		if name == "warm-b" {
			// The host sleeps: the guest's clock stops an hour behind
			// (set back here, as a suspended host leaves it), and the
			// host sets it again once it sees its own clock moved.
			if out, code := run(sb, "root", fmt.Sprintf("busybox date -u -s @%d >/dev/null", time.Now().Add(-time.Hour).Unix())); code != 0 {
				t.Fatalf("%s: setting the guest's clock back: %q", name, out)
			}
			slept.Store(int64(time.Hour))
			var g, before, after time.Time
			for range 50 {
				if g, before, after = guestClock(sb); !g.Before(before.Add(-time.Second)) && !g.After(after.Add(time.Second)) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if g.Before(before.Add(-time.Second)) || g.After(after.Add(time.Second)) {
				t.Errorf("%s: after the host slept, the guest's clock reads %v; the host's was %v to %v", name, g, before, after)
			}
		}
		ph, ok := sb.Net().Placeholder("key")
		if !ok {
			t.Fatalf("%s: no placeholder", name)
		}
		placeholders = append(placeholders, ph)
		if out, _ := run(sb, machinetest.User, "echo $KEY"); strings.TrimSpace(out) != ph {
			t.Errorf("%s: KEY=%q, want its own placeholder %q", name, out, ph)
		}
		out, code := run(sb, machinetest.User, "timeout 20 nc svc.test 7000 </dev/null")
		if reached := code == 0 && strings.Contains(out, "reached"); reached != (i == 1) {
			t.Errorf("%s (policy %d): reached the service: %v (%d %q)", name, i, reached, code, out)
		}
		if out, code := run(sb, machinetest.User, "echo from-"+name+" > /workspace/new"); code != 0 {
			t.Errorf("%s: writing the mount: %q", name, out)
		}
		if b, _ := os.ReadFile(filepath.Join(s.host, "new")); string(b) != "from-"+name+"\n" {
			t.Errorf("%s: its write on the host: %q", name, b)
		}
	}
	if len(random) != 2 {
		t.Errorf("the two resumed guests drew the same random bytes: %v", random)
	}
	if placeholders[0] == placeholders[1] {
		t.Errorf("the two resumed sandboxes have one placeholder %q", placeholders[0])
	}

	// Nothing of a sandbox is in the snapshot.
	key := first.sb.Started().Snapshot
	for _, f := range []string{snapshot.StateFile, snapshot.MemoryFile, snapshot.DiskFile, snapshot.MetaFile} {
		b, err := os.ReadFile(filepath.Join(cache.Dir(), key, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range append([]string{secret, "warm-a", "warm-b", "warm-c"}, placeholders...) {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("the snapshot's %s holds %q", f, s)
			}
		}
	}

	// A start interrupted while it resumes leaves no QEMU.
	ictx, icancel := context.WithCancel(ctx)
	go func() {
		for range 2000 {
			if qemuOf("warm-i") != 0 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		icancel()
	}()
	if s, err := start(ictx, "warm-i", narrow, cache); err == nil {
		t.Errorf("a start interrupted as its QEMU started went on: %+v", s.sb.Started())
	}
	if pid := qemuOf("warm-i"); pid != 0 {
		t.Errorf("an interrupted start left QEMU %d", pid)
	}

	// A corrupted snapshot is found out and the sandbox boots; the
	// snapshot is gone, to be saved again.
	mem, err := os.OpenFile(filepath.Join(cache.Dir(), key, snapshot.MemoryFile), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	off, err := unix.Seek(int(mem.Fd()), 0, unix.SEEK_DATA)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	mem.ReadAt(b, off)
	mem.WriteAt([]byte{b[0] ^ 0xff}, off)
	mem.Close()
	fresh, err := snapshot.Open(cache.Dir())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	cold, err := start(ctx, "warm-d", narrow, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if st := cold.sb.Started(); st.How != sandbox.Cold || !strings.Contains(st.Warning, "digest") {
		t.Errorf("a start on a corrupted snapshot: %+v, want a cold boot saying why", st)
	}
	if out, _ := run(cold.sb, machinetest.User, "hostname; cat /workspace/whose"); out != "warm-d\nwarm-d\n" {
		t.Errorf("the cold sandbox: %q", out)
	}
	if _, err := os.Stat(filepath.Join(cache.Dir(), key)); !os.IsNotExist(err) {
		t.Errorf("the corrupted snapshot is still there: %v", err)
	}
}

// qemuOf returns the pid of a QEMU running the machine name, or 0.
func qemuOf(name string) int {
	des, _ := os.ReadDir("/proc")
	for _, de := range des {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(b, []byte("qemu")) && bytes.Contains(b, []byte("\x00sbx-"+name+"\x00")) {
			return pid
		}
	}
	return 0
}
