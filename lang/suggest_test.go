package lang

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSuggest(t *testing.T) {
	for _, tc := range []struct {
		given      string
		candidates []string
		want       string
	}{
		{"quikstart", []string{"agent", "quickstart"}, "quickstart"},
		{"aply", []string{"apply", "plan", "ps"}, "apply"},
		{"destory", []string{"destroy", "status"}, "destroy"},
		{"x", []string{"ps"}, ""},                  // a short name matches nothing far
		{"plan", []string{"plan"}, ""},             // the name itself is no suggestion
		{"lgos", []string{"logs", "lock"}, "logs"}, // the closest wins
		{"zzzzzz", []string{"apply"}, ""},
	} {
		if got := Suggest(tc.given, tc.candidates); got != tc.want {
			t.Errorf("Suggest(%q, %q) = %q, want %q", tc.given, tc.candidates, got, tc.want)
		}
	}
}

// TestReferenceDiagnostics checks the detail of the diagnostics for
// misspelt references (a "Did you mean" naming the declared block or
// value) and their grammar.
func TestReferenceDiagnostics(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    string
		detail []string // substrings of one diagnostic's detail each
	}{
		{
			name: "misspelt image",
			src: `
image "quickstart" {
  base = "alpine:3.23"
}
sandbox "dev" {
  image = image.quikstart
}`,
			detail: []string{`image.quikstart refers to an image that is not declared. Did you mean image.quickstart? Declare it with an image "quikstart" {} block.`},
		},
		{
			name: "unrelated image",
			src: `
image "quickstart" {
  base = "alpine:3.23"
}
sandbox "dev" {
  image = image.other
}`,
			detail: []string{`image.other refers to an image that is not declared. Declare it with an image "other" {} block.`},
		},
		{
			name: "misspelt egress, variable and local",
			src: `
variable "version" {
  default = "3.23"
}
locals {
  size = "1GiB"
}
image "img" {
  base = "alpine:${var.verison}"
  size = local.sise
}
egress "llm" {
  allow = ["api.example.com"]
}
sandbox "dev" {
  image  = image.img
  egress = [egress.lm]
}`,
			detail: []string{
				`var.verison refers to an input variable that is not declared. Did you mean var.version?`,
				`local.sise refers to a local value that is not declared. Did you mean local.size?`,
				`egress.lm refers to an egress block that is not declared. Did you mean egress.llm? Declare it with an egress "lm" {} block.`,
			},
		},
		{
			name: "misspelt root name",
			src: `
variable "version" {
  default = "3.23"
}
image "img" {
  base = "alpine:${vars.version}"
}`,
			detail: []string{`There is nothing named "vars" here. Did you mean var.version?`},
		},
		{
			name: "grammar of block names and kinds",
			src: `
image "-bad" {
  base = "alpine:3.23"
}
image "img" {
  base = "npm:left-pad@1.3.0"
  user "a" {
    uid = 1000
  }
  user "a" {
    uid = 1001
  }
}`,
			detail: []string{
				`"-bad" is not a valid name for an image block`,
				`not an npm source`,
				`image.img already has a user block "a"`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			_, diags := Load(dir, Options{})
			var all []string
			for _, d := range diags {
				all = append(all, d.Summary+": "+d.Detail)
			}
			for _, want := range tc.detail {
				found := false
				for _, d := range diags {
					found = found || strings.Contains(d.Detail, want)
				}
				if !found {
					t.Errorf("no diagnostic's detail holds %q; got:\n%s", want, strings.Join(all, "\n"))
				}
			}
		})
	}
}
