package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

func TestMounts(t *testing.T) {
	cfg := &lang.Config{Dir: "/cfg", Images: map[string]*lang.Image{"box": {Users: []*lang.User{{Name: "agent", UID: 1000, GID: 1001}}}}}
	sb := &lang.Sandbox{Image: "box", User: "agent", Policy: policy.Sandbox{Mounts: []policy.Mount{
		{Guest: "/w", Host: "."},
		{Guest: "/r", Host: "/abs", Owner: "root"},
	}}}
	got, err := Mounts(cfg, sb)
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
	if _, err := Mounts(cfg, sb); err == nil || !strings.Contains(err.Error(), "sbx.hcl:9") {
		t.Errorf("an owner the image lacks: %v", err)
	}
}

// TestMountsRefusesLinksOut: a host directory inside the checkout that a
// symbolic link leads out of is refused (the checkout may be someone
// else's); a link that stays inside is followed, and a directory the spec
// names outside explicitly is taken.
func TestMountsRefusesLinksOut(t *testing.T) {
	cfgDir, outside := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(cfgDir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"out": outside, "in": "src", "home": "../../../../../../../../root"} {
		if err := os.Symlink(target, filepath.Join(cfgDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &lang.Config{Dir: cfgDir, Images: map[string]*lang.Image{"box": {}}}
	resolve := func(host string) (string, error) {
		ms, err := Mounts(cfg, &lang.Sandbox{Image: "box", Policy: policy.Sandbox{Mounts: []policy.Mount{{Guest: "/w", Host: host}}}})
		if err != nil {
			return "", err
		}
		return ms[0].HostDir, nil
	}
	for _, bad := range []string{"out", "home", "out/sub"} {
		if dir, err := resolve(bad); err == nil && !strings.HasPrefix(dir, cfgDir) {
			t.Errorf("host %q resolved to %s outside the checkout", bad, dir)
		} else if err == nil && bad != "out/sub" {
			t.Errorf("host %q: no error", bad)
		}
	}
	if dir, err := resolve("in"); err != nil || dir != filepath.Join(mustEval(t, cfgDir), "src") {
		t.Errorf("a link inside: %s, %v", dir, err)
	}
	if dir, err := resolve(outside); err != nil || dir != outside {
		t.Errorf("an absolute host: %s, %v", dir, err)
	}
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
