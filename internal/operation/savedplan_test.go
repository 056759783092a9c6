package operation

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/plan/plantest"
	"github.com/sbx-dev/sbx/lang"
)

const savedPlanSpec = `
image "box" {
  base = "alpine:3.23"
  env  = { LANG = "C.UTF-8" }
  user "agent" {
    uid = 1000
  }
}

vfs "work" {
  mount "/work" {
    host   = "."
    access = "rw"
  }
}

sandbox "box" {
  image = image.box
  vfs   = [vfs.work]
  user  = "agent"
  cpus  = 2
}
`

// loadIn writes spec as dir's configuration and loads it with a lock
// that plans it.
func loadIn(t *testing.T, dir, spec string) (*lang.Config, *lockfiles.Lock) {
	t.Helper()
	must(t, os.WriteFile(filepath.Join(dir, "sbx.hcl"), []byte(spec), 0o644))
	cfg, d := lang.Load(dir, lang.Options{Environ: []string{}})
	if d.HasErrors() {
		t.Fatal(d.Error())
	}
	lock, err := plantest.Lock(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, lock
}

// TestApplyRefusesAnEditedSavedPlan: a plan saved before the
// configuration was edited — in what the sandbox is started with, its
// image's environment or the uid of its mount's owner included — is
// refused as out of date, and so is one saved by an sbx that did not
// record what a sandbox takes from its image. The plan saved from the
// configuration as it is goes on to apply.
func TestApplyRefusesAnEditedSavedPlan(t *testing.T) {
	for _, tc := range []struct{ name, from, to string }{
		{"nothing", "", ""},
		{"cpus", "cpus  = 2", "cpus  = 3"},
		{"image env", `"C.UTF-8"`, `"POSIX"`},
		{"owner uid", "uid = 1000", "uid = 1001"},
		{"mount host", `host   = "."`, `host   = "sub"`},
		{"old plan", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			must(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
			cfg, lock := loadIn(t, dir, savedPlanSpec)
			desired, hd := plan.Desired(cfg, lock)
			if hd.HasErrors() {
				t.Fatal(hd.Error())
			}
			file := filepath.Join(t.TempDir(), "plan.json")
			must(t, plan.WriteFile(file, plan.FromState(desired, nil)))
			if tc.name == "old plan" {
				b, err := os.ReadFile(file)
				must(t, err)
				var doc map[string]any
				must(t, json.Unmarshal(b, &doc))
				for _, c := range doc["resource_changes"].([]any) {
					if after, _ := c.(map[string]any)["after"].(map[string]any); after != nil {
						if sb, _ := after["sandbox"].(map[string]any); sb != nil {
							delete(sb, "image_env")
							delete(sb, "mounts")
						}
					}
				}
				b, err = json.Marshal(doc)
				must(t, err)
				must(t, os.WriteFile(file, b, 0o600))
			}
			saved, err := plan.ReadFile(file)
			must(t, err)
			edited := strings.Replace(savedPlanSpec, tc.from, tc.to, 1)
			if tc.from != "" && edited == savedPlanSpec {
				t.Fatal("the edit changed nothing")
			}
			cfg, lock = loadIn(t, dir, edited)
			var h recorder
			out, ds := Apply(context.Background(), ApplyRequest{Config: cfg, Lock: lock, Saved: saved, SavedPath: file, RuntimeBase: t.TempDir()}, &h)
			refused := len(ds) > 0 && ds[0].Summary == "The saved plan is out of date"
			if want := tc.from != "" || tc.name == "old plan"; refused != want {
				t.Fatalf("refused %v, want %v: %v", refused, want, ds)
			}
			if refused {
				if out.Applied || h.applied != 0 {
					t.Errorf("a refused plan was applied: %+v", out)
				}
				return
			}
			// Applied without asking; the image cannot be built here.
			if !out.Applied || len(h.asked) != 0 || out.Err == nil || !strings.Contains(out.Err.Error(), "no way to build images") {
				t.Errorf("the current saved plan: outcome %+v, asked %q, diagnostics %v", out, h.asked, ds)
			}
		})
	}
}
