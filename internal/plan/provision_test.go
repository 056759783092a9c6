package plan_test

import (
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/state"
)

// TestProvisionStepReplaces: changing a provision step's command
// replaces the image and every sandbox using it; the same steps plan no
// change.
func TestProvisionStepReplaces(t *testing.T) {
	step := `  provision "tools" {
    run = ["sh", "-c", "echo one > /etc/tool"]
  }
}

egress "llm" {`
	spec := strings.Replace(smallSpec, "}\n\negress \"llm\" {", step, 1)
	if spec == smallSpec {
		t.Fatal("the step was not added")
	}
	cfg, lock := loadWithPins(t, writeSpec(t, spec))
	desired, diags := plan.Desired(cfg, lock)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	st := &state.State{Lineage: "b1c0e5a2-0000-4000-8000-000000000000", Serial: 1, Resources: desired}
	if p := plan.FromState(desired, st); p.HasChanges() {
		t.Fatalf("the same steps plan changes: %+v", p.Summary())
	}

	changed := strings.Replace(spec, "echo one", "echo two", 1)
	cfg2, lock2 := loadWithPins(t, writeSpec(t, changed))
	desired2, diags := plan.Desired(cfg2, lock2)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p := plan.FromState(desired2, st)
	got := map[string]*plan.ResourceChange{}
	for _, c := range p.Changes {
		got[c.Addr.String()] = c
	}
	img, sb := got["image.agent"], got["sandbox.eval"]
	if img == nil || img.Action != plan.Replace || img.Reason != "its provision steps changed" {
		t.Errorf("image change = %+v, want a replacement because its provision steps changed", img)
	}
	if sb == nil || sb.Action != plan.Replace || !strings.Contains(sb.Reason, "image.agent is replaced") {
		t.Errorf("sandbox change = %+v, want a replacement because its image is", sb)
	}
	if a := desired2[0].Image; a == nil || a.InputHash != desired[0].Image.InputHash {
		t.Errorf("the input hash changed with a provision step: %+v", a)
	}
}
