package plan_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/lang"
)

// packagesConfig loads a configuration whose image is built from Debian
// packages only.
func packagesConfig(t *testing.T, packages string) *lang.Config {
	t.Helper()
	dir := t.TempDir()
	spec := `image "agent" {
  platform = "linux/amd64"
  packages = ` + packages + `
}

sandbox "agent" {
  image = image.agent
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return cfg
}

// TestAgainstUnlockedPackages compares revisions of an image with
// packages when one has no lock file: the package list stands in for the
// pins, so the same list is no change and another list replaces the
// image, instead of both sides failing as not locked.
func TestAgainstUnlockedPackages(t *testing.T) {
	before := packagesConfig(t, `["bash", "git"]`)
	same := packagesConfig(t, `["bash", "git"]`)
	other := packagesConfig(t, `["bash", "git", "jq"]`)

	p, diags := plan.AgainstSides(plan.Side{Config: same}, plan.Side{Config: before, Unlocked: true}, "HEAD")
	if diags.HasErrors() || p == nil {
		t.Fatalf("same packages: %v", diags)
	}
	if p.HasChanges() || len(p.Unlocked) != 1 {
		t.Errorf("same packages: changes %v, unlocked %v", p.Changes, p.Unlocked)
	}

	p, diags = plan.AgainstSides(plan.Side{Config: other, Unlocked: true}, plan.Side{Config: before, Unlocked: true}, "HEAD")
	if diags.HasErrors() || p == nil {
		t.Fatalf("another package list: %v", diags)
	}
	var replaced []string
	for _, c := range p.Changes {
		if c.Action == plan.Replace {
			replaced = append(replaced, c.Addr.String())
		}
	}
	if strings.Join(replaced, " ") != "image.agent sandbox.agent" {
		t.Errorf("another package list replaces %q, want the image and its sandbox", replaced)
	}
}
