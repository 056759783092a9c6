//go:build linux

package plan

import (
	"github.com/sbx-dev/sbx/internal/vfs"
	"github.com/sbx-dev/sbx/policy"
)

// compileRules compiles a mount's path rules with package vfs, the file
// server's own engine, so that the plan shows what the server hides.
// Package vfs builds on Linux only, where the server runs.
func compileRules(m policy.Mount) (pathRules, error) {
	r, err := vfs.CompileRules(m)
	if err != nil {
		return nil, err
	}
	return vfsRules{r}, nil
}

type vfsRules struct{ r *vfs.Rules }

func (v vfsRules) class(rel string) pathClass {
	switch v.r.Classify(rel) {
	case vfs.Hidden:
		return classHidden
	case vfs.TmpfsPath:
		return classTmpfs
	}
	return classVisible
}

func (v vfsRules) hiddenBy(rel string) []string { return v.r.HiddenBy(rel) }
