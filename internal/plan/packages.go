package plan

import (
	"fmt"
	"strings"

	"github.com/sbx-dev/sbx/internal/lockfiles"
)

// packageInputs records each pinned package of an image's lock entry in
// inputs, as "package.NAME" → "NAME=VERSION", so that a plan can say
// which packages a replacement adds, removes or moves.
func packageInputs(inputs map[string]string, locked *lockfiles.Image) {
	for key, p := range locked.Inputs {
		if name, ok := strings.CutPrefix(key, lockfiles.PackageKeyPrefix); ok {
			inputs[key] = name + "=" + p.Version
		}
	}
}

// inputsReason says why an image is replaced, from the keys of the inputs
// that changed (sorted): other inputs by key, then the packages grouped
// as added, removed and moved, as in "artifact.tool changed, packages
// added (jq), removed (nano) and moved (git 1:2.39.5-0+deb12u1 →
// 1:2.39.5-0+deb12u2)". Long package lists name the first few and count
// the rest.
func inputsReason(changed []string, before, after map[string]string) string {
	var others, added, removed, moved []string
	for _, k := range changed {
		name, ok := strings.CutPrefix(k, lockfiles.PackageKeyPrefix)
		if !ok {
			others = append(others, k)
			continue
		}
		b, hadB := before[k]
		n, hasN := after[k]
		switch {
		case !hadB:
			added = append(added, name)
		case !hasN:
			removed = append(removed, name)
		default:
			moved = append(moved, fmt.Sprintf("%s %s → %s", name, versionOf(b), versionOf(n)))
		}
	}
	var parts []string
	if len(others) > 0 {
		parts = append(parts, joinClauses(others)+" changed")
	}
	var pk []string
	for _, g := range []struct {
		what  string
		names []string
	}{{"added", added}, {"removed", removed}, {"moved", moved}} {
		if len(g.names) > 0 {
			pk = append(pk, fmt.Sprintf("%s (%s)", g.what, shortList(g.names, 4)))
		}
	}
	if len(pk) > 0 {
		parts = append(parts, "packages "+joinClauses(pk))
	}
	return strings.Join(parts, ", ")
}

func versionOf(nameVersion string) string {
	_, v, _ := strings.Cut(nameVersion, "=")
	return v
}

func shortList(s []string, n int) string {
	if len(s) <= n {
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(s[:n], ", "), len(s)-n)
}
