//go:build linux

package sandbox

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/internal/machine/vm"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
	"github.com/sbx-dev/sbx/internal/qcow2"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/policy"
)

// stuckGuest is a hypervisor whose guest boots, answers the hello, says
// on its console that it begins mounting /workspace, and then never
// answers again: not the configure request, not the request to power
// off. It is what a guest whose mount(2) waits forever looks like to
// the host.
type stuckGuest struct {
	t    *testing.T
	done chan struct{}
	once sync.Once

	mu    sync.Mutex
	conns []net.Conn
	lns   []net.Listener
	// portEnded is closed when the host's end of the mount's port
	// closes.
	portEnded chan struct{}
}

func (g *stuckGuest) Probe(context.Context, string) (vm.Host, error) {
	return vm.Host{Accel: vm.AccelTCG, Note: "stand-in"}, nil
}

func (g *stuckGuest) keep(c net.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.conns = append(g.conns, c)
}

func (g *stuckGuest) Start(ctx context.Context, spec vm.Spec) (vm.Process, error) {
	listen := func(path string, serve func(net.Conn)) {
		ln, err := net.Listen("unix", path)
		if err != nil {
			g.t.Error(err)
			return
		}
		g.mu.Lock()
		g.lns = append(g.lns, ln)
		g.mu.Unlock()
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			g.keep(c)
			serve(c)
		}()
	}
	for name, path := range spec.Ports {
		if name == bootproto.ControlPort {
			// The power-off request is read and ignored.
			listen(path, func(c net.Conn) { io.Copy(io.Discard, c) })
			continue
		}
		listen(path, func(c net.Conn) {
			io.Copy(io.Discard, c)
			close(g.portEnded)
		})
	}
	listen(spec.AgentSocket, func(c net.Conn) {
		conn := agentproto.NewConn(c)
		if _, err := conn.ReadFrame(); err != nil {
			return
		}
		conn.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Version: agentproto.Version, Software: "stuck", Capabilities: []string{agentproto.CapConfigure}})
		for {
			if _, err := conn.ReadFrame(); err != nil {
				return
			}
		}
	})
	var console net.Conn
	for _, path := range []string{spec.NetSocket, spec.ConsoleSocket} {
		c, err := net.Dial("unix", path)
		if err != nil {
			return nil, err
		}
		g.keep(c)
		if path == spec.NetSocket {
			go io.Copy(io.Discard, c)
		}
		console = c
	}
	io.WriteString(console, "[    1.0] 9pnet: Installing 9P2000 support\r\n"+
		bootproto.Ready{Mode: bootproto.ModeServe}.Line()+
		bootproto.StepLine("mount /workspace from sbx.vfs.0"))
	return g, nil
}

func (g *stuckGuest) Pid() int              { return 4242 }
func (g *stuckGuest) Done() <-chan struct{} { return g.done }
func (g *stuckGuest) Wait(ctx context.Context) error {
	select {
	case <-g.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *stuckGuest) Kill() error {
	g.once.Do(func() {
		g.mu.Lock()
		for _, c := range g.conns {
			c.Close()
		}
		for _, ln := range g.lns {
			ln.Close()
		}
		g.mu.Unlock()
		close(g.done)
	})
	return nil
}

func (g *stuckGuest) killed() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// TestStartConfigureTimeout: a guest that never finishes its configure
// request does not keep Start waiting. Once the bound passes, Start's
// error names the step the guest announced last and quotes its console,
// and stopping the sandbox leaves nothing running: the VM killed, the
// mount's port closed, the machine's directory gone.
func TestStartConfigureTimeout(t *testing.T) {
	images := t.TempDir()
	disk := filepath.Join(images, "root.qcow2")
	if err := qcow2.Create(disk, 64<<20); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"vmlinuz", "initrd"} {
		if err := os.WriteFile(filepath.Join(images, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	work := t.TempDir()
	spec := Spec{
		Name: "box",
		Image: &Image{Image: "agent", Platform: "linux/amd64", Outputs: map[string]ImageOutput{
			OutputKernel:    {Path: filepath.Join(images, "vmlinuz")},
			OutputInitramfs: {Path: filepath.Join(images, "initrd")},
			OutputDisk:      {Path: disk},
		}},
		StopTimeout: 200 * time.Millisecond,
		Mounts:      []sandboxfs.Mount{{Policy: policy.Mount{Guest: "/workspace", Host: ".", Access: policy.ReadWrite}, HostDir: work, UID: 1000, GID: 1000}},
	}
	auth, err := ca.New()
	if err != nil {
		t.Fatal(err)
	}
	g := &stuckGuest{t: t, done: make(chan struct{}), portEnded: make(chan struct{})}
	dir, err := os.MkdirTemp("", "sbx-cfg-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	const bound = time.Second
	begin := time.Now()
	s, err := Start(context.Background(), spec, Options{Dir: dir, CA: auth, Hypervisor: g, ConfigureTimeout: bound})
	took := time.Since(begin)
	if err == nil {
		s.Stop(context.Background())
		t.Fatal("Start returned a sandbox whose guest never configured")
	}
	for _, want := range []string{
		"sandbox box: the guest did not finish configuring within 1s: mount /workspace from sbx.vfs.0 did not finish",
		"console (console.log), last lines:\n  [    1.0] 9pnet: Installing 9P2000 support\n  sbx-guest: ready ",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error:\n%v\nwant it to say:\n%s", err, want)
		}
	}
	if took > bound+30*time.Second {
		t.Errorf("Start returned after %v", took)
	}
	if !g.killed() {
		t.Error("the VM was left running")
	}
	select {
	case <-g.portEnded:
	case <-time.After(10 * time.Second):
		t.Error("the mount's port was left open")
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left behind in the machines' directory: %v", left)
	}
}

// The default bound covers the boot timeout and, per mount, what the
// guest itself waits before it reports the mount failed.
func TestDefaultConfigureTimeout(t *testing.T) {
	spec := Spec{BootTimeout: time.Minute, Mounts: make([]sandboxfs.Mount, 2)}
	if got, want := DefaultConfigureTimeout(spec), time.Minute+2*(2*30*time.Second+15*time.Second); got != want {
		t.Errorf("DefaultConfigureTimeout = %v, want %v", got, want)
	}
	if got := DefaultConfigureTimeout(Spec{}); got != 2*time.Minute {
		t.Errorf("DefaultConfigureTimeout of a spec without mounts = %v, want the machine's boot timeout", got)
	}
}
