package lang

import (
	"slices"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/policy"
)

// TestForbidEnvInPolicy checks that a sandbox's forbid_env reaches its
// policy sorted and without repeats, with the attribute's origin, and
// that a refused name's error names the pattern and where it is declared.
func TestForbidEnvInPolicy(t *testing.T) {
	dir := writeDir(t, map[string]string{"main.hcl": `
image "agent" {
  base = "alpine:3.23"
}
sandbox "eval" {
  image      = image.agent
  forbid_env = ["MOLTNET_*", "AWS_*", "MOLTNET_*"]
  env        = { CI = "1" }
}
sandbox "open" {
  image = image.agent
}
`})
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p := cfg.Sandboxes["eval"].Policy
	if !slices.Equal(p.ForbidEnv, []string{"AWS_*", "MOLTNET_*"}) {
		t.Errorf("ForbidEnv = %q", p.ForbidEnv)
	}
	if want := (policy.Origin{Block: "sandbox.eval", File: "main.hcl", Line: 7}); p.ForbidEnvOrigin != want {
		t.Errorf("ForbidEnvOrigin = %+v, want %+v", p.ForbidEnvOrigin, want)
	}
	if open := cfg.Sandboxes["open"].Policy; open.ForbidEnv != nil || open.ForbidEnvOrigin != (policy.Origin{}) {
		t.Errorf("a sandbox without forbid_env has %q at %+v", open.ForbidEnv, open.ForbidEnvOrigin)
	}

	dir = writeDir(t, map[string]string{"main.hcl": `
image "agent" {
  base = "alpine:3.23"
}
sandbox "eval" {
  image      = image.agent
  forbid_env = ["MOLTNET_*"]
  env        = { MOLTNET_AGENT = "worker" }
}
`})
	_, diags = Load(dir, Options{})
	if len(diags) != 1 || !diags.HasErrors() {
		t.Fatalf("diags = %v; want one error", diags)
	}
	d := diags[0]
	if d.Subject == nil || d.Subject.Start.Line != 8 {
		t.Errorf("error at %v, want main.hcl:8", d.Subject)
	}
	for _, want := range []string{"MOLTNET_AGENT", `"MOLTNET_*"`, "sandbox.eval, main.hcl:7"} {
		if !strings.Contains(d.Detail, want) {
			t.Errorf("detail %q does not name %s", d.Detail, want)
		}
	}
}
