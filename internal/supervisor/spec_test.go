package supervisor

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReadSpecOfAnOlderSupervisor: the spec.json a supervisor of the
// release before sandbox.Spec wrote (every field set) is read back, so
// that sbx exec, ps and destroy still find the sandboxes it runs after an
// upgrade.
func TestReadSpecOfAnOlderSupervisor(t *testing.T) {
	b, err := os.ReadFile("../sandbox/testdata/spec-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, SpecFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	spec, err := ReadSpec(dir)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Name != "box" || spec.Image.Image != "agent" || len(spec.Mounts) != 1 || spec.User != "agent" {
		t.Errorf("read %+v", spec)
	}
}
