package supervisor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sbx-dev/sbx/internal/sandbox"
)

// writeSpec writes the spec Spawn would write in dir.
func writeSpec(t *testing.T, dir string, spec Spec) {
	t.Helper()
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, SpecFile), string(b))
}

// TestListConfigGoesByTheDirectory: ListConfig finds every supervisor
// directory SandboxDir gives the configuration's sandboxes, with or
// without a spec, and nothing else: not another configuration's
// directory whose spec names this configuration, not a link, a file or a
// name no sandbox can have.
func TestListConfigGoesByTheDirectory(t *testing.T) {
	base := filepath.Join(t.TempDir(), "run")
	configDir := filepath.Join(t.TempDir(), "proj")
	other := filepath.Join(t.TempDir(), "other")
	dirOf := func(config, name string) string {
		t.Helper()
		dir, err := SandboxDir(base, config, name)
		if err != nil {
			t.Fatal(err)
		}
		return dir
	}
	img := &sandbox.Image{Image: "agent"}
	box := dirOf(configDir, "box")
	writeSpec(t, box, Spec{Name: "box", ConfigDir: configDir, Image: img})
	// A start that failed before Spawn wrote its spec.
	ghost := dirOf(configDir, "ghost")
	writeTestFile(t, filepath.Join(ghost, LogFile), "exec: no QEMU\n")
	// Another configuration's sandbox, whose spec claims this one.
	forged := dirOf(other, "forged")
	writeSpec(t, forged, Spec{Name: "forged", ConfigDir: configDir, Image: img})
	hashDir := filepath.Dir(box)
	writeTestFile(t, filepath.Join(hashDir, "file"), "x")
	if err := os.Symlink(forged, filepath.Join(hashDir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(hashDir, "9lives"), 0o700); err != nil {
		t.Fatal(err)
	}

	list, err := ListConfig(context.Background(), base, configDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name)
		if e.Liveness.Running || e.Liveness.Gone == "" {
			t.Errorf("%s: liveness %+v; want gone, saying why", e.Name, e.Liveness)
		}
	}
	if !slices.Equal(names, []string{"box", "ghost"}) {
		t.Fatalf("ListConfig found %v; want [box ghost]", names)
	}
	if list[0].Dir != box || list[0].Spec == nil || list[0].Spec.Name != "box" {
		t.Errorf("box: %+v; want its directory %s and spec", list[0], box)
	}
	if list[1].Dir != ghost || list[1].Spec != nil {
		t.Errorf("ghost: %+v; want its directory %s and no spec", list[1], ghost)
	}

	// A configuration with nothing under base, and a base that does not
	// exist, have none.
	for _, b := range []string{base, filepath.Join(t.TempDir(), "none")} {
		if list, err := ListConfig(context.Background(), b, t.TempDir()); err != nil || len(list) != 0 {
			t.Errorf("ListConfig of a configuration with no sandboxes under %s: %v, %v", b, list, err)
		}
	}
}

// TestListConfigRefusesLinkedHashDir: the configuration's directory
// under base must be a directory of this user's, not a link to one.
func TestListConfigRefusesLinkedHashDir(t *testing.T) {
	base := filepath.Join(t.TempDir(), "run")
	configDir := filepath.Join(t.TempDir(), "proj")
	box, err := SandboxDir(base, configDir, "box")
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	writeTestFile(t, filepath.Join(elsewhere, "box", LogFile), "x")
	if err := os.MkdirAll(base, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Dir(box)); err != nil {
		t.Fatal(err)
	}
	list, err := ListConfig(context.Background(), base, configDir)
	if _, ok := err.(*UnsafeError); !ok || len(list) != 0 {
		t.Errorf("ListConfig through a linked directory: %v, %v; want an *UnsafeError and nothing", list, err)
	}
}
