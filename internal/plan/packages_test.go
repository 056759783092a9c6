package plan

import (
	"testing"

	"github.com/sbx-dev/sbx/internal/lockfiles"
)

func TestInputsReason(t *testing.T) {
	before := map[string]string{"artifact.tool": "file:./a", "package.git": "git=1:2.39.5-0+deb12u1", "package.nano": "nano=7.2-1"}
	after := map[string]string{"artifact.tool": "file:./b", "package.git": "git=1:2.39.5-0+deb12u2", "package.jq": "jq=1.6-2.1"}
	got := inputsReason([]string{"artifact.tool", "package.git", "package.jq", "package.nano"}, before, after)
	want := "artifact.tool changed, packages added (jq), removed (nano) and moved (git 1:2.39.5-0+deb12u1 → 1:2.39.5-0+deb12u2)"
	if got != want {
		t.Errorf("reason\n %s\nwant\n %s", got, want)
	}
	var many []string
	a := map[string]string{}
	for _, n := range []string{"a1", "a2", "a3", "a4", "a5", "a6"} {
		many = append(many, "package."+n)
		a["package."+n] = n + "=1"
	}
	if got := inputsReason(many, nil, a); got != "packages added (a1, a2, a3, a4 and 2 more)" {
		t.Errorf("long list: %s", got)
	}
	if got := inputsReason([]string{"base"}, nil, nil); got != "base changed" {
		t.Errorf("plain: %s", got)
	}
}

func TestPackageInputs(t *testing.T) {
	in := map[string]string{"base": "debian"}
	packageInputs(in, &lockfiles.Image{Inputs: map[string]*lockfiles.Pin{
		"base":        {Source: "debian"},
		"packages":    {Source: "git"},
		"package.git": {Version: "1:2.39.5-0+deb12u2"},
	}})
	if len(in) != 2 || in["package.git"] != "git=1:2.39.5-0+deb12u2" {
		t.Errorf("inputs %v", in)
	}
}
