package sandbox

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/vm"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/policy"
)

// sharer is a hypervisor that runs nothing and says whether it could
// give a machine file system devices.
type sharer struct{ err error }

func (sharer) Probe(context.Context, string) (vm.Host, error) {
	return vm.Host{Accel: vm.AccelTCG}, nil
}
func (sharer) Start(context.Context, vm.Spec) (vm.Process, error) {
	return nil, errors.New("runs nothing")
}
func (sharer) AddFS(context.Context, vm.Process, int, string, *os.File) error {
	return errors.New("runs nothing")
}
func (s sharer) CanShareFiles(context.Context, string) error { return s.err }

// noSharer is a hypervisor with no file system devices at all.
type noSharer struct{}

func (noSharer) Probe(context.Context, string) (vm.Host, error) {
	return vm.Host{Accel: vm.AccelTCG}, nil
}
func (noSharer) Start(context.Context, vm.Spec) (vm.Process, error) {
	return nil, errors.New("runs nothing")
}

// TestMountTransports: mounts that name no transport go over virtio-fs
// where the hypervisor can give the machine such devices and over 9P
// elsewhere, saying why; a transport asked for is used, or refused with
// the reason; a mount's own transport is kept.
func TestMountTransports(t *testing.T) {
	mounts := []sandboxfs.Mount{
		{Policy: policy.Mount{Guest: "/a"}},
		{Policy: policy.Mount{Guest: "/b"}, Transport: sandboxfs.Transport9P},
	}
	cannot := sharer{errors.New("no vhost-user-fs-pci here")}
	for _, c := range []struct {
		name      string
		hv        machine.Hypervisor
		asked     sandboxfs.Transport
		want      sandboxfs.Transport
		note, err string
	}{
		{"can", sharer{}, "", sandboxfs.TransportVirtioFS, "", ""},
		{"cannot", cannot, "", sandboxfs.Transport9P, "no vhost-user-fs-pci here", ""},
		{"no file systems", noSharer{}, "", sandboxfs.Transport9P, "cannot give a machine file system devices", ""},
		{"9p asked for", sharer{}, sandboxfs.Transport9P, sandboxfs.Transport9P, "", ""},
		{"virtiofs asked for", sharer{}, sandboxfs.TransportVirtioFS, sandboxfs.TransportVirtioFS, "", ""},
		{"virtiofs asked for, cannot", cannot, sandboxfs.TransportVirtioFS, "", "", "mounts over virtio-fs: no vhost-user-fs-pci here"},
		{"unknown", sharer{}, "nfs", "", "", `mount transport "nfs"`},
	} {
		opts := Options{MountTransport: c.asked, Hypervisor: c.hv}
		got, tr, note, err := mountTransports(context.Background(), mounts, opts, "amd64")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v; want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || tr != c.want || !strings.Contains(note, c.note) || (c.note == "") != (note == "") {
			t.Errorf("%s: %q, %q, %v; want %q, %q", c.name, tr, note, err, c.want, c.note)
			continue
		}
		if got[0].Transport != c.want || got[1].Transport != sandboxfs.Transport9P || mounts[0].Transport != "" {
			t.Errorf("%s: mounts %+v (the caller's %+v)", c.name, got, mounts)
		}
	}
	// With every mount naming its own, nothing is chosen or probed.
	_, tr, note, err := mountTransports(context.Background(), mounts[1:], Options{Hypervisor: cannot, MountTransport: sandboxfs.TransportVirtioFS}, "amd64")
	if tr != "" || note != "" || err != nil {
		t.Errorf("mounts with their own transports: %q, %q, %v", tr, note, err)
	}
}
