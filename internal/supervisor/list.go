package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/sbx-dev/sbx/addrs"
)

// Entry is one supervisor directory found by List or ListConfig.
type Entry struct {
	// Name is the sandbox's: the directory's last component.
	Name string
	// Dir is the supervisor's directory.
	Dir string
	// Spec is what it was started with; ListConfig leaves it nil for a
	// directory with no readable spec.
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
		out = append(out, Entry{Name: filepath.Base(dir), Dir: dir, Spec: spec})
	}
	inspectAll(ctx, out)
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Spec, out[j].Spec
		if a.ConfigDir != b.ConfigDir {
			return a.ConfigDir < b.ConfigDir
		}
		return a.Name < b.Name
	})
	return out
}

// inspectAll fills in the Liveness of each entry, inspecting them all at
// once: each may take Inspect's bound.
func inspectAll(ctx context.Context, entries []Entry) {
	var wg sync.WaitGroup
	for i := range entries {
		wg.Go(func() { entries[i].Liveness = Inspect(ctx, entries[i].Dir, 0, 0) })
	}
	wg.Wait()
}

// ListConfig finds the supervisor directories of the configuration in
// configDir under base (RuntimeBase): the directory SandboxDir gives each
// of its sandboxes, whatever a state file records, and inspects each. It
// is how sbx finds what an apply that failed or was interrupted left
// behind, and the sandboxes of a configuration whose state is lost.
//
// A directory belongs to the configuration by where it is —
// base/<hash of configDir's absolute path>/<name>, as SandboxDir computes
// it — not by the configuration its spec names, so a directory whose
// spec is missing or unreadable (a start that failed early) is found too,
// with Spec nil. Only real directories (no symbolic links) whose names a
// sandbox may have (addrs.ValidName) count, and each is checked as
// SandboxDir checks it: a runtime directory another user could control is
// an *UnsafeError, and nothing is listed. It is sorted by name; a
// configuration with no directory under base has none.
func ListConfig(ctx context.Context, base, configDir string) ([]Entry, error) {
	hashDir, err := configHashDir(base, configDir)
	if err != nil {
		return nil, err
	}
	if err := secureDir(hashDir, 2, false); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(hashDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	var out []Entry
	for _, e := range ents { // sorted by name
		if !e.IsDir() || !addrs.ValidName(e.Name()) {
			continue
		}
		dir, err := SandboxDir(base, configDir, e.Name())
		var unsafe *UnsafeError
		if errors.As(err, &unsafe) {
			return nil, err
		}
		if err != nil {
			continue // a name too long for a sandbox's sockets: not one sbx made
		}
		if dir, err = filepath.Abs(dir); err != nil {
			return nil, fmt.Errorf("supervisor: %w", err)
		}
		spec, _ := ReadSpec(dir)
		out = append(out, Entry{Name: e.Name(), Dir: dir, Spec: spec})
	}
	inspectAll(ctx, out)
	return out, nil
}
