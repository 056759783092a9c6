package plan_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/bindings"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/lang"
)

// TestSecretSourcesReadNothing: the report of where each secret is read
// runs no command (neither the spec's nor a binding's) and shows no
// command's text, in the text or the JSON.
func TestSecretSourcesReadNothing(t *testing.T) {
	dir := t.TempDir()
	marks := t.TempDir()
	// A real home, so that a command run in the bindings file's
	// directory would start.
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".config", "sbx"), 0o700); err != nil {
		t.Fatal(err)
	}
	specRan, boundRan := filepath.Join(marks, "spec"), filepath.Join(marks, "bound")
	spec := `image "agent" {
  platform = "linux/amd64"
}
egress "e" {
  allow = ["api.test"]
}
secret "spec_cmd" {
  env    = "A"
  hosts  = ["api.test"]
  source = "command:touch ` + specRan + `; echo sk-spec-literal"
}
secret "bound_cmd" {
  env    = "B"
  hosts  = ["api.test"]
  source = "command:touch ` + specRan + `"
}
sandbox "s" {
  image   = image.agent
  egress  = [egress.e]
  secrets = [secret.spec_cmd, secret.bound_cmd]
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	f, diags := bindings.Parse([]byte(`binding "bound_cmd" {
  source = "command:touch `+boundRan+`; echo sk-bound-literal"
}
`), filepath.Join(home, ".config", "sbx", "bindings.hcl"), bindings.Options{Home: home})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p := &plan.Plan{Against: "state", Secrets: plan.SecretSources(cfg, f)}
	var text bytes.Buffer
	if err := plan.Render(&text, p, plan.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	js, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{specRan, boundRan} {
		if _, err := os.Stat(m); err == nil {
			t.Errorf("planning ran a command (%s exists)", m)
		}
	}
	out := text.String() + string(js)
	for _, leak := range []string{"sk-bound-literal", "sk-spec-literal", "touch"} {
		if strings.Contains(out, leak) {
			t.Errorf("the plan shows a command's text %q:\n%s", leak, out)
		}
	}
	for _, want := range []string{
		"secret.bound_cmd: command (bindings ~/.config/sbx/bindings.hcl:1), for sandbox.s",
		"! secret.spec_cmd:  none (main.hcl:7): the spec's source is a command, which sbx never runs; bind secret.spec_cmd in ~/.config/sbx/bindings.hcl",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the plan lacks %q:\n%s", want, text.String())
		}
	}
}
