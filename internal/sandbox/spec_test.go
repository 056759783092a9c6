package sandbox

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"testing"
	"time"
)

// TestSpecReadsOldSpecFiles: testdata/spec-v1.json is what a supervisor
// of the release before Spec moved here wrote (supervisor.Spec, every
// field set). A supervisor started by it is read back by its successor:
// the file decodes with no field unknown, and writing it again gives the
// same JSON names.
func TestSpecReadsOldSpecFiles(t *testing.T) {
	b, err := os.ReadFile("testdata/spec-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("an old spec.json: %v", err)
	}
	if s.Name != "box" || s.ConfigDir != "/home/u/proj" || s.CPUs != 2 || s.Memory != 1<<30 ||
		s.User != "agent" || len(s.Env) != 2 || s.BootTimeout != 90*time.Second || s.StopTimeout != 10*time.Second {
		t.Errorf("the sandbox's fields: %+v", s)
	}
	if s.Image == nil || s.Image.Image != "agent" || s.Image.Manifest != "/c/image.json" ||
		s.Image.Outputs[OutputDisk].Path != "/c/root.qcow2" || s.Image.Outputs[OutputKernel].Digest != "sha256:01" {
		t.Errorf("the image: %+v", s.Image)
	}
	if len(s.Policy.Allow) != 1 || s.Policy.Allow[0].Pattern.String() != "api.example.com" || len(s.Policy.Mounts) != 1 {
		t.Errorf("the policy: %+v", s.Policy)
	}
	if len(s.Mounts) != 1 || s.Mounts[0].HostDir != "/home/u/proj" || s.Mounts[0].UID != 1000 || s.Mounts[0].Policy.Guest != "/workspace" {
		t.Errorf("the mounts: %+v", s.Mounts)
	}

	again, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var old, now map[string]any
	if err := json.Unmarshal(b, &old); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(again, &now); err != nil {
		t.Fatal(err)
	}
	for _, path := range [][]string{nil, {"image"}, {"image", "Outputs", "disk"}} {
		o, n := at(t, old, path), at(t, now, path)
		if ok, nk := slices.Sorted(maps.Keys(o)), slices.Sorted(maps.Keys(n)); !slices.Equal(ok, nk) {
			t.Errorf("the names at %v: written %v, were %v", path, nk, ok)
		}
	}
	om, nm := old["mounts"].([]any), now["mounts"].([]any)
	if len(om) != 1 || len(nm) != 1 {
		t.Fatalf("mounts: %v, %v", om, nm)
	}
	if ok, nk := slices.Sorted(maps.Keys(om[0].(map[string]any))), slices.Sorted(maps.Keys(nm[0].(map[string]any))); !slices.Equal(ok, nk) {
		t.Errorf("a mount's names: written %v, were %v", nk, ok)
	}
}

// at is the object at path in v.
func at(t *testing.T, v map[string]any, path []string) map[string]any {
	t.Helper()
	for _, k := range path {
		next, ok := v[k].(map[string]any)
		if !ok {
			t.Fatalf("no object at %q of %v", k, path)
		}
		v = next
	}
	return v
}

// TestStartRefusesNoImage: a spec with no image is an error before
// anything is opened or booted.
func TestStartRefusesNoImage(t *testing.T) {
	if _, err := Start(t.Context(), Spec{Name: "box"}, Options{}); err == nil {
		t.Fatal("a spec with no image started")
	}
}
