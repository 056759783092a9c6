package plan_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/plan/plantest"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

const smallSpec = `variable "claude_version" {
  default = "2.1.328"
}

image "agent" {
  platform = "linux/amd64"
  base     = "alpine:3.23"

  artifact "claude" {
    source = "npm:@anthropic-ai/claude-code-linux-x64-musl@${var.claude_version}"
    file   = "package/claude"
    dest   = "/usr/local/bin/claude"
    mode   = "0755"
  }
}

egress "llm" {
  allow = ["api.anthropic.com"]
}

sandbox "eval" {
  image  = image.agent
  egress = [egress.llm]
  cpus   = 2
  memory = "1GiB"
  env    = { TERM = "xterm" }
}
`

func writeSpec(t *testing.T, spec string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDesired(t *testing.T) {
	cfg, lock := loadWithPins(t, writeSpec(t, smallSpec))
	got, diags := plan.Desired(cfg, lock)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if len(got) != 2 || got[0].Addr != addrs.ImageRef("agent") || got[1].Addr != addrs.SandboxRef("eval") {
		t.Fatalf("Desired = %v, want image.agent then sandbox.eval", got)
	}
	img, sb := got[0], got[1]
	if img.Address != "image.agent" || sb.Address != "sandbox.eval" {
		t.Errorf("addresses %q, %q", img.Address, sb.Address)
	}
	if img.Image.InputHash != lock.Images["agent"].InputHash || !strings.HasPrefix(img.Image.InputHash, "sha256:") {
		t.Errorf("image input hash %q, lock has %q", img.Image.InputHash, lock.Images["agent"].InputHash)
	}
	wantInputs := map[string]string{
		"base":            "alpine:3.23",
		"artifact.claude": "npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.328",
	}
	if len(img.Image.Inputs) != len(wantInputs) {
		t.Errorf("inputs %v, want %v", img.Image.Inputs, wantInputs)
	}
	for k, v := range wantInputs {
		if img.Image.Inputs[k] != v {
			t.Errorf("inputs[%s] = %q, want %q", k, img.Image.Inputs[k], v)
		}
	}
	s := sb.Sandbox
	if s.Image != "agent" || s.ImageHash != img.Image.InputHash || s.CPUs != 2 || s.Memory != 1<<30 || s.Env["TERM"] != "xterm" {
		t.Errorf("sandbox attrs %+v", s)
	}
	if s.PolicyHash != policy.Hash(cfg.Sandboxes["eval"].Policy) || s.PolicyHash == "" {
		t.Errorf("policy hash %q", s.PolicyHash)
	}
	if len(s.Policy.Allow) != 1 || s.Policy.Allow[0].Pattern.String() != "api.anthropic.com" {
		t.Errorf("policy %+v", s.Policy)
	}
}

func TestDesiredLockErrors(t *testing.T) {
	dir := writeSpec(t, smallSpec)
	cfg, lock := loadWithPins(t, dir)
	bumped, err := lang.Load(dir, lang.Options{Vars: []string{"claude_version=2.1.332"}})
	if err.HasErrors() {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  *lang.Config
		lock *lockfiles.Lock
		want string
	}{
		{"no lock", cfg, nil, "not locked"},
		{"image missing from lock", cfg, &lockfiles.Lock{Images: map[string]*lockfiles.Image{}}, "not locked"},
		{"stale lock", bumped, lock, "2.1.332"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, diags := plan.Desired(tt.cfg, tt.lock)
			if !diags.HasErrors() {
				t.Fatalf("no error; resources %v", got)
			}
			text := diags.Error()
			if !strings.Contains(text, tt.want) || !strings.Contains(text, "sbx lock") {
				t.Errorf("diagnostics %q, want %q and a hint to run `sbx lock`", text, tt.want)
			}
			for _, d := range diags {
				if d.Subject == nil || !strings.HasSuffix(d.Subject.Filename, "main.hcl") || d.Subject.Start.Line == 0 {
					t.Errorf("diagnostic %q has no range in main.hcl: %v", d.Summary, d.Subject)
				}
			}
			for _, r := range got {
				if r.Addr.Kind == addrs.Image || r.Sandbox != nil && r.Sandbox.Image == "agent" {
					t.Errorf("resource %s planned despite its image being unlocked", r.Address)
				}
			}
		})
	}
}

func TestDesiredIgnoresLockEntriesOfRemovedImages(t *testing.T) {
	cfg, lock := loadWithPins(t, writeSpec(t, smallSpec))
	lock.Images["old"] = &lockfiles.Image{Name: "old", Platform: "linux/amd64", InputHash: "sha256:00"}
	if _, diags := plan.Desired(cfg, lock); diags.HasErrors() {
		t.Errorf("a lock entry for a removed image fails the plan: %v", diags)
	}
	if res, diags := plan.Desired(nil, lock); len(res) != 0 || diags.HasErrors() {
		t.Errorf("Desired(nil) = %v, %v", res, diags)
	}
}

func TestFromStateAndAgainst(t *testing.T) {
	dir := writeSpec(t, smallSpec)
	cfg, lock := loadWithPins(t, dir)
	desired, diags := plan.Desired(cfg, lock)
	if diags.HasErrors() {
		t.Fatal(diags)
	}

	first := plan.FromState(desired, nil)
	if first.Against != "state" || first.StateLineage != "" || first.Summary().Add != 2 {
		t.Errorf("first plan: against %q lineage %q summary %+v", first.Against, first.StateLineage, first.Summary())
	}
	st := &state.State{Lineage: "b1c0e5a2-0000-4000-8000-000000000000", Serial: 9, Resources: desired}
	again := plan.FromState(desired, st)
	if again.HasChanges() || again.StateLineage != st.Lineage || again.StateSerial != 9 {
		t.Errorf("plan against own state: changes %v, lineage %q, serial %d", again.HasChanges(), again.StateLineage, again.StateSerial)
	}

	other := writeSpec(t, strings.Replace(smallSpec, `allow = ["api.anthropic.com"]`, `allow = ["*.anthropic.com"]`, 1))
	otherCfg, otherLock := loadWithPins(t, other)
	p, diags := plan.Against(cfg, lock, otherCfg, otherLock, "main")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if p.Against != "main" || p.StateLineage != "" {
		t.Errorf("against %q, lineage %q", p.Against, p.StateLineage)
	}
	if s := p.Summary(); s != (plan.Summary{Change: 1, Narrow: 1}) {
		t.Errorf("summary %+v, want one in-place narrowing", s)
	}

	p, diags = plan.Against(cfg, lock, nil, nil, "")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if s := p.Summary(); s.Add != 2 || s.Widen != 1 {
		t.Errorf("against nothing: summary %+v", s)
	}

	_, diags = plan.Against(cfg, lock, otherCfg, nil, "main")
	if !diags.HasErrors() {
		t.Error("an unlocked other revision is not an error")
	}
}

// TestDesiredStartedAttrs: a desired sandbox records its image's
// environment and its mounts' owners as numbers (the sandbox's user
// when the mount names none); a state written before they were recorded
// plans no change, and one whose attributes differ only in them neither
// (they follow from the image hash and the policy), while the sandboxes
// of a state without them are still replaced when the image changes.
func TestDesiredStartedAttrs(t *testing.T) {
	dir := t.TempDir()
	spec := `
image "box" {
  base = "alpine:3.23"
  env  = { LANG = "C.UTF-8" }
  user "agent" {
    uid = 1000
    gid = 1001
  }
  user "ops" {
    uid = 7
  }
}

vfs "work" {
  mount "/work" {
    host = "."
  }
  mount "/ops" {
    host  = "ops"
    owner = "ops"
  }
  mount "/root" {
    host  = "r"
    owner = "root"
  }
}

sandbox "box" {
  image = image.box
  vfs   = [vfs.work]
  user  = "agent"
}
`
	if err := os.WriteFile(filepath.Join(dir, "sbx.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, ds := lang.Load(dir, lang.Options{Environ: []string{}})
	if ds.HasErrors() {
		t.Fatal(ds.Error())
	}
	lock, err := plantest.Lock(cfg)
	if err != nil {
		t.Fatal(err)
	}
	desired, ds := plan.Desired(cfg, lock)
	if ds.HasErrors() {
		t.Fatal(ds.Error())
	}
	var sb *state.SandboxAttrs
	for _, r := range desired {
		if r.Sandbox != nil {
			sb = r.Sandbox
		}
	}
	// In the policy's order (by guest path).
	wantOwners := []state.MountOwner{{Guest: "/ops", UID: 7, GID: 7}, {Guest: "/root"}, {Guest: "/work", UID: 1000, GID: 1001}}
	if sb == nil || !slices.Equal(sb.Mounts, wantOwners) || len(sb.ImageEnv) != 1 || sb.ImageEnv["LANG"] != "C.UTF-8" {
		t.Fatalf("desired sandbox %+v", sb)
	}

	// The state an older sbx wrote from the same configuration.
	var old []*state.Resource
	for _, r := range desired {
		c := *r
		if r.Sandbox != nil {
			a := *r.Sandbox
			a.ImageEnv, a.Mounts = nil, nil
			a.Runtime = &state.Runtime{Dir: "/run/x", Pid: 1}
			c.Sandbox = &a
		}
		old = append(old, &c)
	}
	if p := plan.Compute(desired, old); p.HasChanges() {
		for _, c := range p.Changes {
			t.Errorf("%s: %s %v", c.Addr, c.Action, c.Attrs)
		}
	}

	// With another image hash, the older state's sandbox is replaced,
	// and the plan's after has what it starts with.
	old[0] = &state.Resource{Addr: old[0].Addr, Address: old[0].Address, Image: &state.ImageAttrs{Platform: old[0].Image.Platform, InputHash: "sha256:old"}}
	for _, r := range old {
		if r.Sandbox != nil {
			r.Sandbox.ImageHash = "sha256:old"
		}
	}
	p := plan.Compute(desired, old)
	c := p.Changes[len(p.Changes)-1]
	if c.Action != plan.Replace || !slices.Equal(c.After.Sandbox.Mounts, wantOwners) {
		t.Errorf("sandbox change %s, after %+v", c.Action, c.After.Sandbox)
	}
}
