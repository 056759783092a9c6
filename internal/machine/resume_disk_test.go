//go:build linux

package machine_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/vm"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/internal/qcow2"
	"github.com/sbx-dev/sbx/platform"
)

// fakeSnapshotter is a fakeHypervisor that can resume: its Start reads
// the root disk overlay's backing file and size, and fails.
type fakeSnapshotter struct {
	fakeHypervisor
	backing string
	size    int64
}

func (h *fakeSnapshotter) Start(ctx context.Context, spec vm.Spec) (vm.Process, error) {
	h.spec, h.started = spec, true
	b, err := os.ReadFile(spec.RootDisk)
	if err != nil {
		return nil, err
	}
	off, n := binary.BigEndian.Uint64(b[8:]), binary.BigEndian.Uint32(b[16:])
	h.backing = string(b[off : off+uint64(n)])
	h.size = int64(binary.BigEndian.Uint64(b[24:]))
	return nil, errors.New("stopped after the overlay")
}

func (h *fakeSnapshotter) Save(ctx context.Context, p vm.Process, w *os.File) error {
	return errors.New("not here")
}

func (h *fakeSnapshotter) Restore(ctx context.Context, p vm.Process, r *os.File) error {
	return errors.New("not here")
}

func (h *fakeSnapshotter) StateID(ctx context.Context, arch string) (string, error) {
	return "fake", nil
}

// TestResumeOverDiskFile: a resume given its saved disk open makes the
// machine's overlay over that descriptor, handed to the hypervisor, not
// over the path, which may name another file by the time the
// hypervisor opens it.
func TestResumeOverDiskFile(t *testing.T) {
	dir := t.TempDir()
	image := filepath.Join(dir, "image.qcow2")
	if err := qcow2.Create(image, 64<<20); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(dir, "disk.qcow2")
	if err := qcow2.CreateOverlay(saved, image, "qcow2", 0); err != nil {
		t.Fatal(err)
	}
	disk, err := os.Open(saved)
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	// The path names another file now.
	if err := os.Rename(saved, saved+".old"); err != nil {
		t.Fatal(err)
	}
	if err := qcow2.Create(saved, 1<<20); err != nil {
		t.Fatal(err)
	}
	raw, err := os.Create(filepath.Join(dir, "memory"))
	if err != nil {
		t.Fatal(err)
	}
	raw.Truncate(1 << 20)
	mem, err := machine.SealMemory(raw, nil)
	raw.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	state, err := os.CreateTemp(dir, "state")
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()

	hv := &fakeSnapshotter{fakeHypervisor: fakeHypervisor{t: t}}
	_, err = machine.Start(context.Background(), machine.Options{
		Name: "box",
		Boot: machine.BootFiles{Kernel: "/k", Initrd: "/i", Disk: image,
			Platform: platform.Platform{OS: "linux", Architecture: "amd64"}},
		Dir:        t.TempDir(),
		Hypervisor: hv,
		Resume:     &machine.Resume{State: state, Memory: mem, Disk: saved, DiskFile: disk, MAC: "52:54:00:5b:78:01"},
	})
	if err == nil {
		t.Fatal("the fake hypervisor started")
	}
	if !hv.started {
		t.Fatalf("Start: %v", err)
	}
	if hv.backing != vm.BackingPath || hv.spec.RootBacking != disk {
		t.Errorf("the overlay is over %q, the hypervisor handed %v; want %q and the saved disk", hv.backing, hv.spec.RootBacking, vm.BackingPath)
	}
	if hv.size != 64<<20 {
		t.Errorf("the overlay's size is %d, not the saved disk's", hv.size)
	}
}

// losingHypervisor's VMs are resumed guests whose agent loses the
// first hello (it reached the saved machine's connection as the agent
// closed it) and answers the next connection's.
type losingHypervisor struct {
	fakeSnapshotter
	mu    sync.Mutex
	conns int
	proc  *fakeProcess
}

func (h *losingHypervisor) Start(ctx context.Context, spec vm.Spec) (vm.Process, error) {
	h.spec, h.started = spec, true
	// As QEMU: connect the network device and the console, listen on
	// the ports and the agent's.
	for _, p := range []string{spec.NetSocket, spec.ConsoleSocket} {
		c, err := net.Dial("unix", p)
		if err != nil {
			return nil, err
		}
		h.t.Cleanup(func() { c.Close() })
	}
	listen := func(p string, serve func(net.Conn)) error {
		ln, err := net.Listen("unix", p)
		if err != nil {
			return err
		}
		h.t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go serve(c)
			}
		}()
		return nil
	}
	for _, p := range spec.Ports {
		if err := listen(p, func(c net.Conn) { io.Copy(io.Discard, c) }); err != nil {
			return nil, err
		}
	}
	err := listen(spec.AgentSocket, func(c net.Conn) {
		defer c.Close()
		conn := agentproto.NewConn(c)
		if _, err := conn.ReadFrame(); err != nil {
			return
		}
		h.mu.Lock()
		h.conns++
		first := h.conns == 1
		h.mu.Unlock()
		if first {
			io.Copy(io.Discard, c) // lost: never answered
			return
		}
		conn.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Version: agentproto.Versions[len(agentproto.Versions)-1]})
		io.Copy(io.Discard, c)
	})
	if err != nil {
		return nil, err
	}
	return h.proc, nil
}

func (h *losingHypervisor) Restore(ctx context.Context, p vm.Process, r *os.File) error { return nil }

// TestResumeHelloLost: a resumed guest's agent that loses the host's
// first hello is sent another on a new connection, rather than waited
// for until the boot's deadline.
func TestResumeHelloLost(t *testing.T) {
	defer machine.SetResumeHelloWait(200 * time.Millisecond)()
	dir := t.TempDir()
	image := filepath.Join(dir, "image.qcow2")
	if err := qcow2.Create(image, 64<<20); err != nil {
		t.Fatal(err)
	}
	raw, err := os.Create(filepath.Join(dir, "memory"))
	if err != nil {
		t.Fatal(err)
	}
	raw.Truncate(1 << 20)
	mem, err := machine.SealMemory(raw, nil)
	raw.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	state, err := os.CreateTemp(dir, "state")
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	proc := &fakeProcess{done: make(chan struct{})}
	hv := &losingHypervisor{fakeSnapshotter: fakeSnapshotter{fakeHypervisor: fakeHypervisor{t: t}}, proc: proc}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := machine.Start(ctx, machine.Options{
		Name: "box",
		Boot: machine.BootFiles{Kernel: "/k", Initrd: "/i", Disk: image,
			Platform: platform.Platform{OS: "linux", Architecture: "amd64"}},
		Dir:         t.TempDir(),
		Hypervisor:  hv,
		BootTimeout: 10 * time.Second,
		Resume:      &machine.Resume{State: state, Memory: mem, Disk: image, MAC: "52:54:00:5b:78:01"},
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	close(proc.done)
	m.Stop(context.Background())
	if hv.conns != 2 {
		t.Errorf("the agent saw %d connections, want 2", hv.conns)
	}
}
