package sandboxfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

func TestResolve(t *testing.T) {
	cfg := &lang.Config{Dir: "/cfg", Images: map[string]*lang.Image{"box": {Users: []*lang.User{{Name: "agent", UID: 1000, GID: 1001}}}}}
	sb := &lang.Sandbox{Image: "box", User: "agent", Policy: policy.Sandbox{Mounts: []policy.Mount{
		{Guest: "/w", Host: "."},
		{Guest: "/r", Host: "/abs", Owner: "root"},
	}}}
	got, err := Resolve(cfg, sb)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].HostDir != "/cfg" || got[0].UID != 1000 || got[0].GID != 1001 {
		t.Errorf("the default owner is the sandbox's user, the host directory the config's: %+v", got[0])
	}
	if got[1].HostDir != "/abs" || got[1].UID != 0 {
		t.Errorf("root-owned absolute mount: %+v", got[1])
	}
	sb.Policy.Mounts = []policy.Mount{{Guest: "/w", Host: ".", Owner: "nobody", Origin: policy.Origin{File: "sbx.hcl", Line: 9}}}
	if _, err := Resolve(cfg, sb); err == nil || !strings.Contains(err.Error(), "sbx.hcl:9") {
		t.Errorf("an owner the image lacks: %v", err)
	}
}

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
