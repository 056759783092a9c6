package operation

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// RecordOutputs records the built output hashes of results (by image
// name) in cfg's lock file, whose lock is lock, and reports to h what it
// wrote, with a warning line for each recorded hash a build did not
// reproduce. With readOnly, a hash the lock does not record, or records
// differently, is an error and nothing is written.
func RecordOutputs(h Hooks, cfg *lang.Config, lock *lockfiles.Lock, results map[string]*image.Result, readOnly bool) diags.Diagnostics {
	path := filepath.Join(cfg.Dir, lockfiles.FileName)
	next := cloneLock(lock)
	var problems, changed []string
	for _, name := range slices.Sorted(maps.Keys(results)) {
		addr := addrs.ImageRef(name).String()
		entry := next.Images[name]
		got := results[name].Digests()
		for _, out := range slices.Sorted(maps.Keys(got)) {
			want, ok := entry.Outputs[out]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("%s output %s: built %s, the lock records no hash", addr, out, got[out]))
			case want != got[out]:
				problems = append(problems, fmt.Sprintf("%s output %s: built %s, the lock records %s", addr, out, got[out], want))
				changed = append(changed, fmt.Sprintf("%s output %s was %s", addr, out, want))
			}
		}
		entry.Outputs = got
	}
	if len(problems) == 0 {
		return nil
	}
	if readOnly {
		return diags.Diagnostics{diags.Sourceless(diags.Error, fmt.Sprintf("The built images do not match the output hashes in %s", path),
			strings.Join(problems, "\n")+"\n\nThe lock file is read-only (-lockfile=readonly). Run \"sbx build\" where the lock file is maintained and commit "+lockfiles.FileName+".")}
	}
	if next.Equal(lock) {
		return nil
	}
	if err := lockfiles.Write(path, next); err != nil {
		return diags.Diagnostics{diags.Sourceless(diags.Error, "Cannot write the lock file", err.Error())}
	}
	h.Message(fmt.Sprintf("Recorded the output hashes in %s.", path))
	for _, c := range changed {
		h.Message(fmt.Sprintf("  Warning: %s; the image did not rebuild to the recorded bytes.", c))
	}
	return nil
}

// cloneLock copies l deeply enough to change image outputs.
func cloneLock(l *lockfiles.Lock) *lockfiles.Lock {
	out := &lockfiles.Lock{Images: map[string]*lockfiles.Image{}}
	if l == nil {
		return out
	}
	for name, img := range l.Images {
		c := *img
		c.Inputs = maps.Clone(img.Inputs)
		c.Outputs = maps.Clone(img.Outputs)
		out.Images[name] = &c
	}
	return out
}
