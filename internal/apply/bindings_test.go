package apply

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/bindings"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/plan/plantest"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// TestApplyHandsTheBindingsValue: the supervisor of a sandbox whose
// secret's spec names a command gets the value of the user's binding,
// read in this process; the spec's command never runs. Without a
// binding no supervisor starts, and the error says what to bind.
func TestApplyHandsTheBindingsValue(t *testing.T) {
	dir, marks := t.TempDir(), t.TempDir()
	specRan, boundRan := filepath.Join(marks, "spec-ran"), filepath.Join(marks, "bound-ran")
	cfg := loadSpec(t, dir, `
image "box" {
  base = "alpine:3.23"
}
egress "api" {
  allow = ["api.example.com"]
}
secret "tok" {
  env    = "TOKEN"
  hosts  = ["api.example.com"]
  source = "command:touch `+specRan+`; echo from-the-spec"
}
sandbox "box" {
  image   = image.box
  egress  = [egress.api]
  secrets = [secret.tok]
}
`)
	lock, err := plantest.Lock(cfg)
	if err != nil {
		t.Fatal(err)
	}
	desired, ds := plan.Desired(cfg, lock)
	if ds.HasErrors() {
		t.Fatal(ds.Error())
	}
	hash := lock.Images["box"].InputHash
	bindDir := t.TempDir()
	bound, diags := bindings.Parse([]byte(`binding "tok" {
  source = "command:touch `+boundRan+`; echo from-the-binding"
  config = "`+dir+`"
}
`), filepath.Join(bindDir, "bindings.hcl"), bindings.Options{Home: bindDir})
	if diags.HasErrors() {
		t.Fatal(diags)
	}

	for _, tc := range []struct {
		name  string
		binds *bindings.File
		fails string
	}{
		{name: "no binding", binds: &bindings.File{Path: filepath.Join(bindDir, "bindings.hcl")}, fails: "never from a spec"},
		{name: "a binding", binds: bound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, err := os.MkdirTemp("", "sbx")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(base)
			var handed []map[string][]byte
			_, err = Apply(context.Background(), Options{
				Config: cfg, Plan: plan.FromState(desired, &state.State{}), State: &state.State{}, Save: (&saver{}).save,
				RuntimeBase: base, Bindings: tc.binds,
				Spawn: supervisor.SpawnOptions{Env: []string{"PATH=" + os.Getenv("PATH")}},
				Build: func(context.Context, string) (*image.Result, error) { return manifestImage(t, hash), nil },
				spawn: func(_ context.Context, _ string, _ supervisor.Spec, opts supervisor.SpawnOptions) (*supervisor.Status, error) {
					handed = append(handed, opts.Secrets)
					return &supervisor.Status{Pid: 1}, nil
				},
			})
			if _, serr := os.Stat(specRan); serr == nil {
				t.Fatal("the spec's command ran")
			}
			if tc.fails != "" {
				if err == nil || !strings.Contains(err.Error(), tc.fails) || !strings.Contains(err.Error(), `binding "tok"`) || len(handed) != 0 {
					t.Errorf("Apply: %v, %d supervisors; want none started and an error saying %q", err, len(handed), tc.fails)
				}
				return
			}
			if err != nil || len(handed) != 1 {
				t.Fatalf("Apply: %v, %d supervisors", err, len(handed))
			}
			if got := string(handed[0]["tok"]); got != "from-the-binding" {
				t.Errorf("the supervisor got %q, want the binding's value", got)
			}
		})
	}
}
