package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/plan/plantest"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"github.com/sbx-dev/sbx/lang"
)

const savedSpec = `
image "box" {
  base = "alpine:3.23"
  env  = { LANG = "C.UTF-8" }
  user "agent" {
    uid = 1000
    gid = 1001
  }
}

vfs "work" {
  mount "/work" {
    host   = "src"
    access = "rw"
  }
}

sandbox "box" {
  image  = image.box
  vfs    = [vfs.work]
  user   = "agent"
  cpus   = 2
  memory = "512MiB"
  env    = { MODE = "planned" }
}
`

func loadSpec(t *testing.T, dir, spec string) *lang.Config {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "sbx.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, ds := lang.Load(dir, lang.Options{Environ: []string{}})
	if ds.HasErrors() {
		t.Fatal(ds.Error())
	}
	return cfg
}

// manifestImage is a built image of box for hash.
func manifestImage(t *testing.T, hash string) *image.Result {
	t.Helper()
	manifest := filepath.Join(t.TempDir(), image.ManifestFile)
	doc := fmt.Sprintf(`{"version": %d, "image": "box", "platform": "linux/amd64"}`, image.ManifestVersion)
	if err := os.WriteFile(manifest, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return &image.Result{Image: "box", InputHash: hash, Manifest: manifest,
		Outputs: map[string]image.Output{image.OutputKernel: {Path: "/c/k"}, image.OutputInitramfs: {Path: "/c/i"}, image.OutputDisk: {Path: "/c/d"}}}
}

// TestApplyStartsTheSavedPlan: a plan saved to a file and read back is
// applied with the sandbox it resolved — CPUs, memory, user, both
// environments, the mount and its owner's ids — although the
// configuration was edited after planning in each of them; the image
// booted is the one built for the plan's image hash, and one built for
// another hash is not started. (The caller, operation.Apply, refuses
// such a plan before it gets here; this is what apply itself does.)
func TestApplyStartsTheSavedPlan(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := loadSpec(t, dir, savedSpec)
	lock, err := plantest.Lock(cfg)
	if err != nil {
		t.Fatal(err)
	}
	desired, ds := plan.Desired(cfg, lock)
	if ds.HasErrors() {
		t.Fatal(ds.Error())
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := plan.WriteFile(planFile, plan.FromState(desired, &state.State{})); err != nil {
		t.Fatal(err)
	}
	hash := lock.Images["box"].InputHash
	want, err := pipeline.SandboxSpec(cfg, cfg.Sandboxes["box"], manifestImage(t, hash))
	if err != nil {
		t.Fatal(err)
	}

	edited := strings.NewReplacer(`"C.UTF-8"`, `"POSIX"`, "uid = 1000", "uid = 2000", `"src"`, `"."`,
		"cpus   = 2", "cpus   = 4", `"512MiB"`, `"1GiB"`, `"planned"`, `"edited"`).Replace(savedSpec)
	if edited == savedSpec {
		t.Fatal("the edit changed nothing")
	}
	editedCfg := loadSpec(t, dir, edited)

	for _, tc := range []struct {
		name  string
		built string
		fails string
	}{
		{name: "the plan's image", built: hash},
		{name: "an image of another hash", built: "sha256:other", fails: "the image built has sha256:other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saved, err := plan.ReadFile(planFile)
			if err != nil {
				t.Fatal(err)
			}
			base, err := os.MkdirTemp("", "sbx")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(base)
			var started []supervisor.Spec
			res, err := Apply(context.Background(), Options{
				Config: editedCfg, Plan: saved, State: &state.State{}, Save: (&saver{}).save, RuntimeBase: base,
				Build: func(context.Context, string) (*image.Result, error) { return manifestImage(t, tc.built), nil },
				spawn: func(_ context.Context, _ string, spec supervisor.Spec, _ supervisor.SpawnOptions) (*supervisor.Status, error) {
					started = append(started, spec)
					return &supervisor.Status{Pid: 1}, nil
				},
			})
			if tc.fails != "" {
				if err == nil || !strings.Contains(err.Error(), tc.fails) || len(started) != 0 || res.Failed != 1 {
					t.Errorf("Apply = %+v, %v, started %d; want it to fail saying %q", res, err, len(started), tc.fails)
				}
				return
			}
			if err != nil || len(started) != 1 {
				t.Fatalf("Apply = %+v, %v; started %d", res, err, len(started))
			}
			got := started[0]
			// The image's files are the build's; the rest is the plan's.
			got.Image, want.Image = nil, nil
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Errorf("started\n%s\nwant the saved plan's\n%s", g, w)
			}
			if got.CPUs != 2 || got.Mounts[0].UID != 1000 || got.Mounts[0].GID != 1001 ||
				got.Mounts[0].HostDir != filepath.Join(dir, "src") || !reflect.DeepEqual(got.Env, []string{"LANG=C.UTF-8", "MODE=planned"}) {
				t.Errorf("started %+v", got)
			}
		})
	}
}
