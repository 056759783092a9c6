package machine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/vm"
	"github.com/sbx-dev/sbx/internal/qcow2"
	"github.com/sbx-dev/sbx/platform"
)

// fakeHypervisor is a Hypervisor that runs nothing: it records the spec
// it is asked to start and fails, or returns exited.
type fakeHypervisor struct {
	t        *testing.T
	probeErr error
	startErr error
	exited   *fakeProcess // returned by Start when startErr is nil
	spec     vm.Spec
	started  bool
}

func (h *fakeHypervisor) Probe(ctx context.Context, arch string) (vm.Host, error) {
	if arch != "amd64" {
		h.t.Errorf("Probe(%q), want the guest's amd64", arch)
	}
	return vm.Host{Accel: vm.AccelTCG, Note: "fake"}, h.probeErr
}

func (h *fakeHypervisor) Start(ctx context.Context, spec vm.Spec) (vm.Process, error) {
	h.spec, h.started = spec, true
	// The machine listens on the sockets the VM connects to first.
	for _, p := range []string{spec.ConsoleSocket, spec.NetSocket} {
		if fi, err := os.Stat(p); err != nil || fi.Mode()&os.ModeSocket == 0 {
			h.t.Errorf("%s is not listening when the VM starts: %v", p, err)
		}
	}
	if h.startErr != nil {
		return nil, h.startErr
	}
	return h.exited, nil
}

// fakeProcess is a VM process that has already exited with err.
type fakeProcess struct {
	err    error
	done   chan struct{}
	killed atomic.Bool
}

func (p *fakeProcess) Pid() int                       { return 4242 }
func (p *fakeProcess) Done() <-chan struct{}          { return p.done }
func (p *fakeProcess) Wait(ctx context.Context) error { return p.err }
func (p *fakeProcess) Kill() error                    { p.killed.Store(true); return nil }

// TestHypervisorFails: the machine reaches its VM only through
// Options.Hypervisor, hands it the machine's description, reports its
// failures as the sandbox's and leaves nothing behind.
func TestHypervisorFails(t *testing.T) {
	images := t.TempDir()
	disk := filepath.Join(images, "root.qcow2")
	if err := qcow2.Create(disk, 64<<20); err != nil {
		t.Fatal(err)
	}
	exited := &fakeProcess{err: errors.New("guest crashed"), done: make(chan struct{})}
	close(exited.done)
	for _, c := range []struct {
		name    string
		hv      *fakeHypervisor
		want    string
		started bool
	}{
		{"probe", &fakeHypervisor{probeErr: errors.New("no emulator here")}, "sandbox box: no emulator here", false},
		{"start", &fakeHypervisor{startErr: errors.New("cannot start")}, "sandbox box: cannot start", true},
		{"exited", &fakeHypervisor{exited: exited}, "sandbox box: QEMU exited before it connected the network device (guest crashed)", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.hv.t = t
			parent := t.TempDir()
			_, err := machine.Start(context.Background(), machine.Options{
				Name: "box",
				Boot: machine.BootFiles{Kernel: "/k", Initrd: "/i", Disk: disk,
					Platform: platform.Platform{OS: "linux", Architecture: "amd64"}},
				Dir:        parent,
				Hypervisor: c.hv,
			})
			if err == nil || err.Error() != c.want {
				t.Errorf("Start: %v, want %q", err, c.want)
			}
			if c.hv.started != c.started {
				t.Errorf("the hypervisor's Start called: %v, want %v", c.hv.started, c.started)
			}
			if c.started {
				dir := filepath.Dir(c.hv.spec.ControlSocket)
				if filepath.Dir(dir) != parent || !strings.HasPrefix(filepath.Base(dir), "sbx-") {
					t.Errorf("control socket %s is not in a machine directory in %s", c.hv.spec.ControlSocket, parent)
				}
				if c.hv.spec.Name != "sbx-box" || c.hv.spec.RootDisk != filepath.Join(dir, machine.OverlayFile) || c.hv.spec.CPUs != machine.DefaultCPUs || c.hv.spec.MemoryBytes != machine.DefaultMemory {
					t.Errorf("the hypervisor was asked for %+v", c.hv.spec)
				}
			}
			if c.hv.exited != nil && !c.hv.exited.killed.Load() {
				t.Error("the exited process was not killed (reaped) by the failed start")
			}
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Errorf("a failed start left %v in %s", left, parent)
			}
		})
	}
}
