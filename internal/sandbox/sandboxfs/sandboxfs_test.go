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
