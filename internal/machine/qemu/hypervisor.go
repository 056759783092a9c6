//go:build unix

package qemu

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/sbx-dev/sbx/internal/machine/vm"
)

// Hypervisor runs VMs described by a vm.Spec as QEMU processes: it is
// package machine's Hypervisor for QEMU, and the one a machine gets when
// it is given none. Its methods are safe for concurrent use.
type Hypervisor struct {
	mu   sync.Mutex
	host *Host // nil until probed
}

// New returns a Hypervisor for host (what Probe found, or a description
// in tests); nil means probing on first use, once, with Probe.
func New(host *Host) *Hypervisor {
	h := new(Hypervisor)
	if host != nil {
		c := *host
		h.host = &c
	}
	return h
}

// QEMUHost returns what the host offers QEMU, probing it if New was
// given nothing and no earlier call succeeded.
func (h *Hypervisor) QEMUHost(ctx context.Context) (Host, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.host == nil {
		host, err := Probe(ctx)
		if err != nil {
			return Host{}, err
		}
		h.host = &host
	}
	return *h.host, nil
}

// Probe says what the host offers a guest of architecture arch (an OCI
// name): its accelerator (Host.Accel) and the host's Note.
func (h *Hypervisor) Probe(ctx context.Context, arch string) (vm.Host, error) {
	host, err := h.QEMUHost(ctx)
	if err != nil {
		return vm.Host{}, err
	}
	return vm.Host{Accel: host.Accel(arch), Note: host.Note}, nil
}

// Start launches QEMU for spec (Launch, with the VMSpec SpecFor makes).
// ctx bounds the start only.
func (h *Hypervisor) Start(ctx context.Context, spec vm.Spec) (vm.Process, error) {
	host, err := h.QEMUHost(ctx)
	if err != nil {
		return nil, fmt.Errorf("VM %q: %w", spec.Name, err)
	}
	p, err := Launch(ctx, SpecFor(spec), host)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Save writes the state of p, a VM this Hypervisor started, to w
// (Process.Save).
func (h *Hypervisor) Save(ctx context.Context, p vm.Process, w *os.File) error {
	qp, ok := p.(*Process)
	if !ok {
		return fmt.Errorf("qemu: saving a %T, not a QEMU process", p)
	}
	return qp.Save(ctx, w)
}

// Restore loads the state in r into p, started with vm.Spec.Incoming
// (Process.Restore).
func (h *Hypervisor) Restore(ctx context.Context, p vm.Process, r *os.File) error {
	qp, ok := p.(*Process)
	if !ok {
		return fmt.Errorf("qemu: restoring a %T, not a QEMU process", p)
	}
	return qp.Restore(ctx, r)
}

// AddFS plugs a vhost-user file system device into p, a VM this
// Hypervisor started (Process.AddFS).
func (h *Hypervisor) AddFS(ctx context.Context, p vm.Process, slot int, tag string, sock *os.File) error {
	qp, ok := p.(*Process)
	if !ok {
		return fmt.Errorf("qemu: adding a file system to a %T, not a QEMU process", p)
	}
	return qp.AddFS(ctx, slot, tag, sock)
}

// CanShareFiles says why a machine of arch cannot be given file
// system devices here (Host.FileSharing), or is nil when it can.
func (h *Hypervisor) CanShareFiles(ctx context.Context, arch string) error {
	host, err := h.QEMUHost(ctx)
	if err != nil {
		return err
	}
	return host.FileSharing(arch)
}

// StateID names the QEMU a guest of arch runs on, its version and
// accelerator: QEMU loads only the states of a machine it could have
// run itself.
func (h *Hypervisor) StateID(ctx context.Context, arch string) (string, error) {
	host, err := h.QEMUHost(ctx)
	if err != nil {
		return "", err
	}
	bin, ok := host.QEMU[arch]
	if !ok {
		return "", fmt.Errorf("qemu: no emulator for %s", arch)
	}
	return fmt.Sprintf("qemu %s %s %s", bin.Version, bin.Path, host.Accel(arch)), nil
}
