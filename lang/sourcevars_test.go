package lang

import (
	"slices"
	"testing"
)

// TestSourceVars checks that a source records the input variables its
// value comes from, directly or through locals, so that messages can say
// which variable to change.
func TestSourceVars(t *testing.T) {
	dir := writeDir(t, map[string]string{"main.hcl": `
variable "tool_url" {
  default = "https://releases.invalid/v1/tool.tar.gz"
}
variable "tool_version" {
  default = "1.0.0"
}
variable "base_repo" {
  default = "alpine"
}
locals {
  base = "${var.base_repo}:3.23"
}
image "i" {
  base = local.base
  artifact "tool" {
    source = var.tool_url
    dest   = "/usr/local/bin/tool"
  }
  artifact "npm" {
    source = "npm:tool@${var.tool_version}"
    dest   = "/usr/local/bin/npm-tool"
  }
  artifact "literal" {
    source = "https://releases.invalid/v2/other.tar.gz"
    dest   = "/usr/local/bin/other"
  }
}
`})
	img := mustLoad(t, dir, Options{}).Images["i"]
	got := map[string][]string{"base": img.Base.Vars}
	for _, a := range img.Artifacts {
		got[a.Name] = a.Source.Vars
	}
	for name, want := range map[string][]string{
		"base":    {"base_repo"},
		"tool":    {"tool_url"},
		"npm":     {"tool_version"},
		"literal": nil,
	} {
		if !slices.Equal(got[name], want) {
			t.Errorf("%s: Vars = %q, want %q", name, got[name], want)
		}
	}
}
