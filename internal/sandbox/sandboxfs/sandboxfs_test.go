package sandboxfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/policy"
)

// TestOpen: a missing host directory is an error naming the spec line;
// a read-only mount is read-only in the guest too unless it has tmpfs
// paths, whose scratch space takes writes.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	_, err := Open([]Mount{{Policy: policy.Mount{Guest: "/w", Origin: policy.Origin{File: "sbx.hcl", Line: 4}}, HostDir: filepath.Join(dir, "missing")}}, nil)
	if err == nil || !strings.Contains(err.Error(), "sbx.hcl:4") {
		t.Errorf("a missing host directory: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "w"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Open([]Mount{
		{Policy: policy.Mount{Guest: "/ro", Access: policy.ReadOnly}, HostDir: filepath.Join(dir, "w")},
		{Policy: policy.Mount{Guest: "/scratch", Access: policy.ReadOnly, Tmpfs: []string{"target"}}, HostDir: filepath.Join(dir, "w")},
		{Policy: policy.Mount{Guest: "/rw", Access: policy.ReadWrite}, HostDir: filepath.Join(dir, "w")},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := s.Guest()
	if len(g) != 3 || !g[0].ReadOnly || g[1].ReadOnly || g[2].ReadOnly {
		t.Errorf("guest mounts %+v", g)
	}
	if len(s.Ports()) != 3 || s.Ports()[g[1].Port] == nil {
		t.Errorf("ports %v", s.Ports())
	}
}

// TestOpenTransports: a mount served by a virtio-fs device has a tag
// and a slot and no port; one over 9P has a port; an unknown transport
// and more devices than a machine has slots are refused, naming them.
func TestOpenTransports(t *testing.T) {
	dir := t.TempDir()
	m := func(guest string, tr Transport) Mount {
		return Mount{Policy: policy.Mount{Guest: guest, Access: policy.ReadWrite}, HostDir: dir, Transport: tr}
	}
	s, err := Open([]Mount{m("/a", Transport9P), m("/b", TransportVirtioFS), m("/c", ""), m("/d", TransportVirtioFS)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := s.Guest()
	if len(g) != 4 || g[0].Port == "" || g[0].Tag != "" || g[1].Tag != "sbx-fs-0" || g[1].Port != "" || g[2].Port == "" || g[3].Tag != "sbx-fs-1" {
		t.Errorf("guest mounts %+v", g)
	}
	for _, x := range g {
		if err := x.Validate(); err != nil {
			t.Errorf("%+v: %v", x, err)
		}
	}
	if s.FSSlots() != 2 || len(s.Ports()) != 2 {
		t.Errorf("%d slots and ports %v; want 2 and 2", s.FSSlots(), s.Ports())
	}
	if _, err := Open([]Mount{m("/a", "nfs")}, nil); err == nil || !strings.Contains(err.Error(), `"nfs"`) {
		t.Errorf("an unknown transport: %v", err)
	}
	var many []Mount
	for i := range 9 {
		many = append(many, m("/m"+string(rune('a'+i)), TransportVirtioFS))
	}
	if _, err := Open(many, nil); err == nil || !strings.Contains(err.Error(), "at most 8") {
		t.Errorf("nine virtio-fs mounts: %v", err)
	}
}
