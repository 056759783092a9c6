package plan

import (
	"github.com/sbx-dev/sbx/policy"
	"github.com/sbx-dev/sbx/policy/match"
)

// compileRules compiles a mount's path rules with policy/match, the
// language the file server enforces with, so that the plan shows what
// the server hides on every host sbx runs on.
func compileRules(m policy.Mount) (pathRules, error) {
	r, err := match.CompileMountRules(m.Hide, m.ReadOnly, m.Tmpfs)
	if err != nil {
		return nil, err
	}
	return mountRules{r}, nil
}

type mountRules struct{ r *match.MountRules }

// class decides as the file server places a path: hidden first, then
// scratch space in memory (read-only or not), else the host's file.
func (v mountRules) class(rel string) pathClass {
	if v.r.Hidden(rel) {
		return classHidden
	}
	if _, ok := v.r.InMemory(rel); ok {
		return classTmpfs
	}
	return classVisible
}

func (v mountRules) hiddenBy(rel string) []string { return v.r.HiddenBy(rel) }
