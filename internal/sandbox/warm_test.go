//go:build linux

package sandbox

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/vm"
	"github.com/sbx-dev/sbx/internal/qcow2"
	"github.com/sbx-dev/sbx/internal/snapshot"
)

// onceNetwork is a Network that, like the sandbox's, serves once.
type onceNetwork struct {
	mu     sync.Mutex
	served int
	ch     chan struct{}
}

func (n *onceNetwork) Serve(ctx context.Context, conn net.Conn) error {
	n.mu.Lock()
	n.served++
	first := n.served == 1
	n.mu.Unlock()
	n.ch <- struct{}{}
	if !first {
		return errors.New("this network has already served a connection")
	}
	<-ctx.Done()
	return nil
}

// connectingHypervisor is a hypervisor whose VMs connect their network
// device, as QEMU does as it starts, and then fail.
type connectingHypervisor struct {
	t     *testing.T
	nets  []*onceNetwork
	mu    sync.Mutex
	specs []vm.Spec
}

func (h *connectingHypervisor) Probe(ctx context.Context, arch string) (vm.Host, error) {
	return vm.Host{Accel: vm.AccelTCG}, nil
}

func (h *connectingHypervisor) Start(ctx context.Context, spec vm.Spec) (vm.Process, error) {
	h.mu.Lock()
	h.specs = append(h.specs, spec)
	h.mu.Unlock()
	c, err := net.Dial("unix", spec.NetSocket)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// Until a network serves the connection.
	select {
	case <-h.nets[0].ch:
	case <-h.nets[1].ch:
	case <-time.After(10 * time.Second):
		h.t.Error("no network served the VM's connection")
	}
	return nil, errors.New("the VM failed")
}

func (h *connectingHypervisor) Save(ctx context.Context, p vm.Process, w *os.File) error {
	return errors.New("not here")
}

func (h *connectingHypervisor) Restore(ctx context.Context, p vm.Process, r *os.File) error {
	return errors.New("not here")
}

func (h *connectingHypervisor) StateID(ctx context.Context, arch string) (string, error) {
	return "fake", nil
}

// TestColdAfterWarmRenewsNetwork: when a resume fails after its VM was
// served the sandbox's network, the boot that follows is given a new
// network, not the one that already served (and would refuse it, leaving
// the sandbox with no network).
func TestColdAfterWarmRenewsNetwork(t *testing.T) {
	dir := t.TempDir()
	disk := filepath.Join(dir, "root.qcow2")
	if err := qcow2.Create(disk, 64<<20); err != nil {
		t.Fatal(err)
	}
	img := &Image{Image: "img", Platform: "linux/amd64", Outputs: map[string]ImageOutput{
		OutputKernel:    {Path: filepath.Join(dir, "vmlinuz"), Digest: "sha256:k"},
		OutputInitramfs: {Path: filepath.Join(dir, "initrd"), Digest: "sha256:i"},
		OutputDisk:      {Path: disk, Digest: "sha256:d"},
	}}
	boot, err := BootFiles(img)
	if err != nil {
		t.Fatal(err)
	}
	first, second := &onceNetwork{ch: make(chan struct{}, 2)}, &onceNetwork{ch: make(chan struct{}, 2)}
	hv := &connectingHypervisor{t: t, nets: []*onceNetwork{first, second}}
	mopts := machine.Options{Name: "box", Boot: boot, Memory: 64 << 20, Dir: t.TempDir(), Hypervisor: hv, Network: first}

	// A snapshot of the shape is in the cache.
	cache, err := snapshot.Open(filepath.Join(dir, "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	shape, err := shapeOf(context.Background(), img, mopts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cache.Create(context.Background(), shape, func(ctx context.Context, memory string, state *os.File, sdisk string) (snapshot.Saved, error) {
		if err := os.WriteFile(memory, nil, 0o600); err != nil {
			return snapshot.Saved{}, err
		}
		if err := os.Truncate(memory, shape.Memory); err != nil {
			return snapshot.Saved{}, err
		}
		state.WriteString("state")
		return snapshot.Saved{MAC: warmMAC}, qcow2.CreateOverlay(sdisk, shape.DiskPath, "qcow2", 64<<20)
	})
	if err != nil {
		t.Fatal(err)
	}

	renewed := 0
	_, st, err := startMachine(context.Background(), Spec{Name: "box", Image: img}, Options{Snapshots: cache},
		func() (machine.Network, error) { renewed++; return second, nil }, mopts)
	if err == nil {
		t.Fatal("the fake VMs started")
	}
	if st.How != Cold || st.Warning == "" {
		t.Errorf("started %+v, want a cold boot after a warm start that failed", st)
	}
	if len(hv.specs) != 2 || !hv.specs[0].Incoming || hv.specs[1].Incoming {
		t.Fatalf("the hypervisor was asked for %d VMs, want a resume and a boot", len(hv.specs))
	}
	if renewed != 1 || first.served != 1 || second.served != 1 {
		t.Errorf("renewed %d times; the first network served %d VMs, the renewed one %d: want 1, 1, 1", renewed, first.served, second.served)
	}
}
