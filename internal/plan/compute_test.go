package plan_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/policy"
)

const (
	hashA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	hashB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func image(name, hash string, inputs map[string]string) *state.Resource {
	a := addrs.ImageRef(name)
	return &state.Resource{Addr: a, Address: a.String(), Image: &state.ImageAttrs{Platform: "linux/amd64", InputHash: hash, Inputs: inputs}}
}

func sandbox(name string, edit func(s *state.SandboxAttrs)) *state.Resource {
	a := addrs.SandboxRef(name)
	s := &state.SandboxAttrs{
		Image:     "agent",
		ImageHash: hashA,
		CPUs:      2,
		Memory:    2 << 30,
		User:      "agent",
		Env:       map[string]string{"TERM": "xterm"},
		Policy: policy.Sandbox{
			Allow: []policy.AllowRule{{Pattern: policy.MustHostPattern("api.anthropic.com"), Origin: policy.Origin{Block: "egress.llm", File: "main.hcl", Line: 12}}},
			Mounts: []policy.Mount{{
				Guest: "/workspace", Host: ".", Access: policy.ReadOnly, Hide: []string{".env"},
				Origin: policy.Origin{Block: "vfs.workspace", File: "main.hcl", Line: 20},
			}},
		},
	}
	if edit != nil {
		edit(s)
	}
	return &state.Resource{Addr: a, Address: a.String(), Sandbox: s}
}

var inputsV1 = map[string]string{"base": "alpine:3.23", "artifact.claude": "npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.328"}
var inputsV2 = map[string]string{"base": "alpine:3.23", "artifact.claude": "npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.332"}

func find(t *testing.T, p *plan.Plan, addr string) *plan.ResourceChange {
	t.Helper()
	for _, c := range p.Changes {
		if c.Addr.String() == addr {
			return c
		}
	}
	t.Fatalf("no change for %s in plan", addr)
	return nil
}

func TestComputeActions(t *testing.T) {
	type want struct {
		action plan.Action
		attrs  []plan.AttrChange
		reason string
	}
	tests := []struct {
		name         string
		prior, desir []*state.Resource
		want         map[string]want
		summary      plan.Summary
	}{
		{
			name:  "no change",
			prior: []*state.Resource{image("agent", hashA, inputsV1), sandbox("eval", nil)},
			desir: []*state.Resource{image("agent", hashA, inputsV1), sandbox("eval", nil)},
			want:  map[string]want{"image.agent": {action: plan.NoOp}, "sandbox.eval": {action: plan.NoOp}},
		},
		{
			name:  "image bumped replaces image and sandbox",
			prior: []*state.Resource{image("agent", hashA, inputsV1), sandbox("eval", nil)},
			desir: []*state.Resource{image("agent", hashB, inputsV2), sandbox("eval", func(s *state.SandboxAttrs) { s.ImageHash = hashB })},
			want: map[string]want{
				"image.agent": {action: plan.Replace, reason: "artifact.claude changed", attrs: []plan.AttrChange{
					{Path: "input_hash", Before: hashA, After: hashB, ForcesReplacement: true},
					{Path: "inputs.artifact.claude", Before: inputsV1["artifact.claude"], After: inputsV2["artifact.claude"]},
				}},
				"sandbox.eval": {action: plan.Replace, reason: "image.agent is replaced", attrs: []plan.AttrChange{
					{Path: "image_hash", Before: hashA, After: hashB, ForcesReplacement: true},
				}},
			},
			summary: plan.Summary{Replace: 2},
		},
		{
			name:  "cpus and env force replacement",
			prior: []*state.Resource{sandbox("eval", nil)},
			desir: []*state.Resource{sandbox("eval", func(s *state.SandboxAttrs) { s.CPUs = 4; s.Env = map[string]string{"LANG": "C.UTF-8"} })},
			want: map[string]want{"sandbox.eval": {action: plan.Replace, reason: "cpus changed and env changed", attrs: []plan.AttrChange{
				{Path: "cpus", Before: "2", After: "4", ForcesReplacement: true},
				{Path: "env.LANG", After: "C.UTF-8", ForcesReplacement: true},
				{Path: "env.TERM", Before: "xterm", ForcesReplacement: true},
			}}},
			summary: plan.Summary{Replace: 1},
		},
		{
			name:  "memory and image name",
			prior: []*state.Resource{sandbox("eval", nil)},
			desir: []*state.Resource{sandbox("eval", func(s *state.SandboxAttrs) { s.Memory = 4 << 30; s.Image = "big" })},
			want: map[string]want{"sandbox.eval": {action: plan.Replace, reason: "it uses image.big instead of image.agent and memory changed", attrs: []plan.AttrChange{
				{Path: "image", Before: "image.agent", After: "image.big", ForcesReplacement: true},
				{Path: "memory", Before: "2GiB", After: "4GiB", ForcesReplacement: true},
			}}},
			summary: plan.Summary{Replace: 1},
		},
		{
			name:  "egress host added updates in place",
			prior: []*state.Resource{sandbox("eval", nil)},
			desir: []*state.Resource{sandbox("eval", func(s *state.SandboxAttrs) {
				s.Policy.Allow = append(s.Policy.Allow, policy.AllowRule{Pattern: policy.MustHostPattern("api.example.com")})
			})},
			want:    map[string]want{"sandbox.eval": {action: plan.Update}},
			summary: plan.Summary{Change: 1, Widen: 1},
		},
		{
			// A running sandbox's file server keeps the rules it
			// started with: new ones take a new sandbox.
			name:  "mount access change replaces",
			prior: []*state.Resource{sandbox("eval", nil)},
			desir: []*state.Resource{sandbox("eval", func(s *state.SandboxAttrs) {
				s.Policy.Mounts = []policy.Mount{{Guest: "/workspace", Host: ".", Access: policy.ReadWrite}}
			})},
			want: map[string]want{"sandbox.eval": {action: plan.Replace, reason: "mount /workspace has new rules", attrs: []plan.AttrChange{
				{Path: `mounts["/workspace"].rules`, Before: `ro hide=".env"`, After: "rw", ForcesReplacement: true},
			}}},
			summary: plan.Summary{Replace: 1, Widen: 2}, // ro→rw, hide ".env" removed
		},
		{
			name:  "writable git metadata widens",
			prior: []*state.Resource{sandbox("eval", nil)},
			desir: []*state.Resource{sandbox("eval", func(s *state.SandboxAttrs) { s.Policy.Mounts[0].GitWritable = true })},
			want: map[string]want{"sandbox.eval": {action: plan.Replace, reason: "mount /workspace has new rules", attrs: []plan.AttrChange{
				{Path: `mounts["/workspace"].rules`, Before: `ro hide=".env"`, After: `ro hide=".env" git_metadata=writable`, ForcesReplacement: true},
			}}},
			summary: plan.Summary{Replace: 1, Widen: 1},
		},
		{
			name:  "mount origin alone changes nothing",
			prior: []*state.Resource{sandbox("eval", nil)},
			desir: []*state.Resource{sandbox("eval", func(s *state.SandboxAttrs) { s.Policy.Mounts[0].Origin = policy.Origin{Block: "vfs.other"} })},
			want:  map[string]want{"sandbox.eval": {action: plan.NoOp}},
		},
		{
			name:  "mount host change replaces",
			prior: []*state.Resource{sandbox("eval", nil)},
			desir: []*state.Resource{sandbox("eval", func(s *state.SandboxAttrs) {
				s.Policy.Mounts = []policy.Mount{{Guest: "/workspace", Host: "./src", Access: policy.ReadOnly, Hide: []string{".env"}}}
			})},
			want: map[string]want{"sandbox.eval": {action: plan.Replace, reason: "mount /workspace has a new host directory", attrs: []plan.AttrChange{
				{Path: `mounts["/workspace"]`, Before: ".", After: "./src", ForcesReplacement: true},
			}}},
			summary: plan.Summary{Replace: 1, Widen: 1},
		},
		{
			name:  "mount added replaces",
			prior: []*state.Resource{sandbox("eval", nil)},
			desir: []*state.Resource{sandbox("eval", func(s *state.SandboxAttrs) {
				s.Policy.Mounts = append(s.Policy.Mounts, policy.Mount{Guest: "/data", Host: "../data", Access: policy.ReadOnly})
			})},
			want: map[string]want{"sandbox.eval": {action: plan.Replace, reason: "mount /data is added", attrs: []plan.AttrChange{
				{Path: `mounts["/data"]`, After: "../data", ForcesReplacement: true},
			}}},
			summary: plan.Summary{Replace: 1, Widen: 1},
		},
		{
			name:  "create and delete",
			prior: []*state.Resource{image("old", hashA, nil), sandbox("gone", nil)},
			desir: []*state.Resource{image("agent", hashA, map[string]string{"base": "alpine:3.23"}), sandbox("eval", nil)},
			want: map[string]want{
				"image.old": {action: plan.Delete, attrs: []plan.AttrChange{{Path: "platform", Before: "linux/amd64"}, {Path: "input_hash", Before: hashA}}},
				"sandbox.gone": {action: plan.Delete, attrs: []plan.AttrChange{
					{Path: "image", Before: "image.agent"}, {Path: "image_hash", Before: hashA}, {Path: "cpus", Before: "2"},
					{Path: "memory", Before: "2GiB"}, {Path: "user", Before: "agent"}, {Path: "env.TERM", Before: "xterm"},
					{Path: `mounts["/workspace"]`, Before: "."},
				}},
				"image.agent": {action: plan.Create, attrs: []plan.AttrChange{
					{Path: "platform", After: "linux/amd64"}, {Path: "input_hash", After: hashA}, {Path: "inputs.base", After: "alpine:3.23"},
				}},
				"sandbox.eval": {action: plan.Create, attrs: []plan.AttrChange{
					{Path: "image", After: "image.agent"}, {Path: "image_hash", After: hashA}, {Path: "cpus", After: "2"},
					{Path: "memory", After: "2GiB"}, {Path: "user", After: "agent"}, {Path: "env.TERM", After: "xterm"},
					{Path: `mounts["/workspace"]`, After: "."},
				}},
			},
			// The created sandbox's whole policy widens: one host, one mount.
			summary: plan.Summary{Add: 2, Destroy: 2, Widen: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := plan.Compute(tt.desir, tt.prior)
			if len(p.Changes) != len(tt.want) {
				t.Fatalf("plan has %d changes, want %d", len(p.Changes), len(tt.want))
			}
			for addr, w := range tt.want {
				c := find(t, p, addr)
				if c.Action != w.action {
					t.Errorf("%s: action %s, want %s", addr, c.Action, w.action)
				}
				if c.Reason != w.reason {
					t.Errorf("%s: reason %q, want %q", addr, c.Reason, w.reason)
				}
				if diff := cmp.Diff(w.attrs, c.Attrs, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s: attrs (-want +got):\n%s", addr, diff)
				}
			}
			if got := p.Summary(); got != tt.summary {
				t.Errorf("summary %+v, want %+v", got, tt.summary)
			}
			if got, want := p.HasChanges(), tt.summary != (plan.Summary{}); got != want {
				t.Errorf("HasChanges() = %v, want %v", got, want)
			}
			if got, want := p.Widens(), tt.summary.Widen > 0; got != want {
				t.Errorf("Widens() = %v, want %v", got, want)
			}
		})
	}
}

func TestComputeOrderAndAddressOnly(t *testing.T) {
	// Resources read from a state file carry only the address string.
	prior := []*state.Resource{
		{Address: "sandbox.b", Sandbox: sandbox("b", nil).Sandbox},
		{Address: "image.agent", Image: image("agent", hashA, nil).Image},
	}
	desired := []*state.Resource{sandbox("b", nil), sandbox("a", nil), image("agent", hashA, nil), image("aaa", hashA, nil)}
	p := plan.Compute(desired, prior)
	var got []string
	for _, c := range p.Changes {
		got = append(got, c.Addr.String()+" "+string(c.Action))
	}
	want := []string{"image.aaa create", "image.agent no-op", "sandbox.a create", "sandbox.b no-op"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
}

func TestComputeReplacedSandboxListsPolicy(t *testing.T) {
	prior := []*state.Resource{sandbox("eval", nil)}
	desired := []*state.Resource{sandbox("eval", func(s *state.SandboxAttrs) {
		s.CPUs = 4
		s.Policy.Mounts[0].Hide = nil
	})}
	c := plan.Compute(desired, prior).Changes[0]
	if c.Action != plan.Replace || len(c.Policy) != 1 || c.Policy[0].Kind != "mount.hide" || c.Policy[0].Direction != policy.Widen {
		t.Errorf("got %s with policy %+v, want replace listing the removed hide rule as widening", c.Action, c.Policy)
	}
}

func TestComputePolicyHashOnly(t *testing.T) {
	// A redundant allow rule changes the policy hash but no access; it is
	// still an in-place update, listed as neutral.
	prior := []*state.Resource{sandbox("eval", func(s *state.SandboxAttrs) {
		s.Policy.Allow = []policy.AllowRule{{Pattern: policy.MustHostPattern("*.anthropic.com")}}
		s.PolicyHash = "sha256:1"
	})}
	desired := []*state.Resource{sandbox("eval", func(s *state.SandboxAttrs) {
		s.Policy.Allow = []policy.AllowRule{{Pattern: policy.MustHostPattern("*.anthropic.com")}, {Pattern: policy.MustHostPattern("api.anthropic.com")}}
		s.PolicyHash = "sha256:2"
	})}
	p := plan.Compute(desired, prior)
	c := p.Changes[0]
	if c.Action != plan.Update || len(c.Policy) != 1 || c.Policy[0].Direction != policy.Neutral {
		t.Fatalf("got %s %+v, want an update with one neutral change", c.Action, c.Policy)
	}
	if s := p.Summary(); s.Widen != 0 || s.Narrow != 0 || s.Change != 1 {
		t.Errorf("summary %+v", s)
	}
}

// TestComputeUnusedHostsNoChange: a hosts mapping of a name the sandbox
// does not reach does nothing, so adding, moving or removing one leaves
// the sandbox as it is, though it moves the policy hash; a mapping of a
// name it reaches is an update, widening.
func TestComputeUnusedHostsNoChange(t *testing.T) {
	withHosts := func(hosts ...policy.HostMapping) *state.Resource {
		return sandbox("eval", func(s *state.SandboxAttrs) {
			s.Policy.Hosts = hosts
			s.PolicyHash = policy.Hash(s.Policy)
		})
	}
	unused := policy.HostMapping{Name: "ollama.test", Addr: "127.0.0.1:11434"}
	moved := policy.HostMapping{Name: "ollama.test", Addr: "127.0.0.1:11435"}
	used := policy.HostMapping{Name: "api.anthropic.com", Addr: "127.0.0.1:8443"}
	for _, c := range []struct {
		name          string
		before, after *state.Resource
		want          plan.Action
	}{
		{"added", withHosts(), withHosts(unused), plan.NoOp},
		{"moved", withHosts(unused), withHosts(moved), plan.NoOp},
		{"removed", withHosts(unused), withHosts(), plan.NoOp},
		{"used added", withHosts(unused), withHosts(unused, used), plan.Update},
	} {
		p := plan.Compute([]*state.Resource{c.after}, []*state.Resource{c.before})
		if got := p.Changes[0].Action; got != c.want {
			t.Errorf("%s: %s with %+v, want %s", c.name, got, p.Changes[0].Policy, c.want)
		}
		if s := p.Summary(); (s.Widen != 0) != (c.want == plan.Update) {
			t.Errorf("%s: summary %+v", c.name, s)
		}
	}
}

func TestRenderNoChanges(t *testing.T) {
	var buf bytes.Buffer
	p := plan.Compute([]*state.Resource{sandbox("eval", nil)}, []*state.Resource{sandbox("eval", nil)})
	if err := plan.Render(&buf, p, plan.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "No changes. Your sandboxes match the configuration.\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	buf.Reset()
	p.Against = "main"
	if err := plan.Render(&buf, p, plan.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "No changes. The configuration matches main.\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestRenderColorAndWidth(t *testing.T) {
	prior := []*state.Resource{sandbox("eval", nil)}
	desired := []*state.Resource{sandbox("eval", func(s *state.SandboxAttrs) {
		s.Policy.Allow = append(s.Policy.Allow, policy.AllowRule{
			Pattern: policy.MustHostPattern("api.example.com"),
			Origin:  policy.Origin{Block: "egress.llm", File: "main.hcl", Line: 14},
		})
	})}
	p := plan.Compute(desired, prior)

	var plain, color, narrow bytes.Buffer
	if err := plan.Render(&plain, p, plan.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := plan.Render(&color, p, plan.RenderOptions{Color: true}); err != nil {
		t.Fatal(err)
	}
	if err := plan.Render(&narrow, p, plan.RenderOptions{Width: 40}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "\x1b[") {
		t.Errorf("colour codes without Color:\n%s", plain.String())
	}
	if !strings.Contains(color.String(), "\x1b[31m[widens] \x1b[0m") {
		t.Errorf("no red widening marker with Color:\n%q", color.String())
	}
	if stripANSI(color.String()) != plain.String() {
		t.Errorf("coloured output differs from plain output beyond colour codes:\n%s\n---\n%s", stripANSI(color.String()), plain.String())
	}
	wantLine := "          + [widens]  adds host api.example.com  # egress.llm, main.hcl:14\n"
	if !strings.Contains(plain.String(), wantLine) {
		t.Errorf("missing %q in:\n%s", wantLine, plain.String())
	}
	wantWrapped := "          + [widens]  adds host api.example.com\n                      # egress.llm, main.hcl:14\n"
	if !strings.Contains(narrow.String(), wantWrapped) {
		t.Errorf("missing %q in:\n%s", wantWrapped, narrow.String())
	}
}

func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b {
			for i < len(s) && s[i] != 'm' {
				i++
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func TestJSONRoundTrip(t *testing.T) {
	prior := []*state.Resource{image("agent", hashA, inputsV1), sandbox("eval", nil), sandbox("gone", nil)}
	desired := []*state.Resource{
		image("agent", hashB, inputsV2),
		sandbox("eval", func(s *state.SandboxAttrs) {
			s.ImageHash = hashB
			s.Policy.Secrets = []policy.SecretBinding{{Name: "claude", Env: "CLAUDE_CODE_OAUTH_TOKEN", Source: "env:CLAUDE_CODE_OAUTH_TOKEN",
				Hosts: []policy.HostPattern{policy.MustHostPattern("api.anthropic.com")}, Origin: policy.Origin{Block: "secret.claude"}}}
			s.Policy.TCP = []policy.TCPRule{{Dest: policy.HostPort{Host: "github.com", Port: 22}}}
		}),
		sandbox("new", nil),
	}
	p := plan.Compute(desired, prior)
	p.Against, p.StateLineage, p.StateSerial = "state", "3f0c2f3e-4b7e-4d8e-9a55-0d7f5e1c2a10", 7

	path := filepath.Join(t.TempDir(), "tfplan.json")
	if err := plan.WriteFile(path, p); err != nil {
		t.Fatal(err)
	}
	got, err := plan.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("round trip (-wrote +read):\n%s", diff)
	}
	var a, b bytes.Buffer
	if err := plan.Render(&a, p, plan.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := plan.Render(&b, got, plan.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("a plan read back renders differently:\n%s\n---\n%s", a.String(), b.String())
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("WriteFile left %d files behind, want only the plan", len(entries))
	}
}

func TestReadFileStrict(t *testing.T) {
	p := plan.Compute([]*state.Resource{sandbox("eval", nil)}, nil)
	p.Against = "state"
	good, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, json, wantErr string
	}{
		{"future version", strings.Replace(string(good), `"format_version": "1.0"`, `"format_version": "2.0"`, 1), `format_version "2.0"`},
		{"no version", strings.Replace(string(good), `"format_version": "1.0",`, ``, 1), "no format_version"},
		{"unknown field", strings.Replace(string(good), `"against": "state",`, `"against": "state", "extra": 1,`, 1), `unknown field "extra"`},
		{"unknown action", strings.Replace(string(good), `"action": "create"`, `"action": "recreate"`, 1), `unknown action "recreate"`},
		{"bad address", strings.Replace(string(good), `"address": "sandbox.eval",`, `"address": "egress.eval",`, 1), "not an image or a sandbox"},
		{"summary mismatch", strings.Replace(string(good), `"add": 1`, `"add": 0`, 1), "does not match"},
		{"not json", "plan", "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.json == string(good) {
				t.Fatal("the edit did not apply; fix the test")
			}
			path := filepath.Join(t.TempDir(), "plan.json")
			if err := os.WriteFile(path, []byte(tt.json), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := plan.ReadFile(path)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
				t.Errorf("ReadFile error %v, want one naming %s and containing %q", err, path, tt.wantErr)
			}
		})
	}
}

func TestWriteFileFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "plan.json")
	if err := os.Mkdir(target, 0o755); err != nil { // rename over a directory fails
		t.Fatal(err)
	}
	p := plan.Compute([]*state.Resource{sandbox("eval", nil)}, nil)
	if err := plan.WriteFile(target, p); err == nil {
		t.Fatal("WriteFile over a directory succeeded")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "plan.json" || !entries[0].IsDir() {
		t.Errorf("WriteFile left files behind: %v", entries)
	}
}

// TestComputeGoneSandbox checks that a sandbox a refresh found not
// running is replaced, with the reason, whatever else changed; and that
// a running one with the same attributes is left alone.
func TestComputeGoneSandbox(t *testing.T) {
	running := func(gone string) func(s *state.SandboxAttrs) {
		return func(s *state.SandboxAttrs) {
			s.Runtime = &state.Runtime{Dir: "/run/sbx/x/box", Pid: 41, QEMUPid: 42, Gone: gone}
		}
	}
	cases := []struct {
		name   string
		before *state.Resource
		after  *state.Resource
		action plan.Action
		reason string
	}{
		{"running", sandbox("box", running("")), sandbox("box", nil), plan.NoOp, ""},
		{"no runtime recorded", sandbox("box", nil), sandbox("box", nil), plan.NoOp, ""},
		{"gone", sandbox("box", running("its supervisor (pid 41) has exited")), sandbox("box", nil), plan.Replace,
			"it no longer runs (its supervisor (pid 41) has exited)"},
		{"gone and changed", sandbox("box", running("its supervisor (pid 41) has exited")), sandbox("box", func(s *state.SandboxAttrs) { s.CPUs = 8 }), plan.Replace,
			"cpus changed, and it no longer runs (its supervisor (pid 41) has exited)"},
		{"gone and removed", sandbox("box", running("its supervisor (pid 41) has exited")), nil, plan.Delete, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var desired []*state.Resource
			if c.after != nil {
				desired = append(desired, c.after)
			}
			p := plan.Compute(desired, []*state.Resource{c.before})
			rc := find(t, p, "sandbox.box")
			if rc.Action != c.action || rc.Reason != c.reason {
				t.Errorf("action %s, reason %q; want %s, %q", rc.Action, rc.Reason, c.action, c.reason)
			}
		})
	}
}

// TestSecretPlainHTTPWidens checks that letting a secret cross plain HTTP
// to a fixture, or go in one more header, is shown as widening.
func TestSecretPlainHTTPWidens(t *testing.T) {
	bound := func(edit func(b *policy.SecretBinding)) func(s *state.SandboxAttrs) {
		return func(s *state.SandboxAttrs) {
			b := policy.SecretBinding{Name: "key", Env: "API_KEY", Source: "env:API_KEY",
				Hosts: []policy.HostPattern{policy.MustHostPattern("api.anthropic.com")}, Origin: policy.Origin{Block: "secret.key", File: "main.hcl", Line: 30}}
			if edit != nil {
				edit(&b)
			}
			s.Policy.Secrets = []policy.SecretBinding{b}
			s.PolicyHash = policy.Hash(s.Policy)
		}
	}
	prior := []*state.Resource{sandbox("eval", bound(nil))}
	desired := []*state.Resource{sandbox("eval", bound(func(b *policy.SecretBinding) {
		b.PlainHTTP = []policy.HostPort{{Host: "api.anthropic.com", Port: 80}}
		b.Headers = []string{"x-api-key"}
	}))}
	p := plan.Compute(desired, prior)
	if s := p.Summary(); s.Widen != 2 {
		t.Errorf("summary %+v, want 2 widening", s)
	}
	var buf bytes.Buffer
	if err := plan.Render(&buf, p, plan.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"secret key may be sent unencrypted, over plain HTTP, to api.anthropic.com:80",
		"secret key is also substituted as the whole value of header x-api-key",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("plan output lacks %q:\n%s", want, buf.String())
		}
	}
}

// TestRenderGitMetadataWidens checks that turning the mount's git
// protection off (git_metadata = "writable") is shown as widening and
// fails -fail-on-widen's summary.
func TestRenderGitMetadataWidens(t *testing.T) {
	prior := []*state.Resource{sandbox("eval", nil)}
	desired := []*state.Resource{sandbox("eval", func(s *state.SandboxAttrs) { s.Policy.Mounts[0].GitWritable = true })}
	p := plan.Compute(desired, prior)
	var buf bytes.Buffer
	if err := plan.Render(&buf, p, plan.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "[widens]  the guest may now write the git configuration, hooks and redirections in /workspace") ||
		!strings.Contains(buf.String(), "1 widening") {
		t.Errorf("the plan does not show writable git metadata as widening:\n%s", buf.String())
	}
}
