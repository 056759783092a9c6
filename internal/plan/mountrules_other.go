//go:build !linux

package plan

import (
	"errors"

	"github.com/sbx-dev/sbx/policy"
)

// compileRules is where package vfs's rule engine would be used; vfs
// builds on Linux only (its file server needs openat2), and mounts are
// served only there, so elsewhere the plan says it did not inspect them
// rather than match with an engine of its own.
func compileRules(policy.Mount) (pathRules, error) {
	return nil, errors.New("host files are inspected only on Linux, where sbx serves mounts")
}
