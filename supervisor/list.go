package supervisor

import (
	"context"
	"path/filepath"
	"sort"
)

// Entry is one supervisor directory found by List.
type Entry struct {
	// Dir is the supervisor's directory.
	Dir string
	// Spec is what it was started with.
	Spec *Spec
	// Liveness says whether it runs (see Inspect).
	Liveness Liveness
}

// List finds the supervisor directories under base (RuntimeBase), those
// SandboxDir makes — base/<hash>/<name> holding a spec — and inspects
// each. It is sorted by configuration directory, then name. A base that
// does not exist holds none.
func List(ctx context.Context, base string) []Entry {
	specs, _ := filepath.Glob(filepath.Join(base, "*", "*", SpecFile))
	var out []Entry
	for _, p := range specs {
		dir := filepath.Dir(p)
		spec, err := ReadSpec(dir)
		if err != nil {
			continue
		}
		out = append(out, Entry{Dir: dir, Spec: spec, Liveness: Inspect(ctx, dir, 0, 0)})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Spec, out[j].Spec
		if a.ConfigDir != b.ConfigDir {
			return a.ConfigDir < b.ConfigDir
		}
		return a.Name < b.Name
	})
	return out
}
