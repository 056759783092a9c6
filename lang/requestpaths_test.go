package lang

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// TestPathPatternMatchingNothingWarns: a path pattern lang accepts but
// that no request can match (the engine refuses paths holding ";") is
// loaded as before, with a warning on its line.
func TestPathPatternMatchingNothingWarns(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"image.hcl": egressImage,
		"main.hcl": `egress "a" {
  allow = ["x.test"]
  request "x.test" {
    paths = ["/v1/**", "/matrix;v=1/**"]
  }
}
sandbox "s" {
  image  = image.agent
  egress = [egress.a]
}
`,
	})
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got := cfg.Sandboxes["s"].Policy.Allow[0].Paths; len(got) != 2 {
		t.Errorf("paths = %q, want both", got)
	}
	var warns []*hcl.Diagnostic
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning {
			warns = append(warns, d)
		}
	}
	if len(warns) != 1 || warns[0].Subject == nil || warns[0].Subject.Start.Line != 4 ||
		warns[0].Summary != "Path pattern that matches no request" || !strings.Contains(warns[0].Detail, `"/matrix;v=1/**"`) {
		t.Errorf("warnings = %v, want one on line 4 about /matrix;v=1/**", warns)
	}
}
