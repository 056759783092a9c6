package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/plan"
)

// RefreshSecrets reads the secrets of every running sandbox the plan
// leaves as it is again and hands their values to its supervisor, so
// that a rotated credential (the source's value changed, the spec did
// not) reaches upstreams without a restart; the guest's placeholders stay.
// A plan can not show this: it never reads secret values. It returns the
// sandboxes refreshed, in order; those it could not refresh are in the
// error. Only Config, Plan, State and RuntimeBase (and Spawn.Env) of opts
// are used.
func RefreshSecrets(ctx context.Context, opts Options) ([]addrs.Ref, error) {
	a := &applier{opts: opts}
	changed := map[string]bool{}
	for _, c := range opts.Plan.Changes {
		if c.Addr.Kind == addrs.Sandbox && c.Action != plan.NoOp {
			changed[c.Addr.Name] = true
		}
	}
	var done []addrs.Ref
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(opts.Config.Sandboxes)) {
		sb := opts.Config.Sandboxes[name]
		if len(sb.Policy.Secrets) == 0 || changed[name] || !running(opts, name) {
			continue
		}
		if err := a.reload(ctx, name, sb.Policy); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sb.Addr(), err))
			continue
		}
		done = append(done, sb.Addr())
	}
	if len(errs) > 0 {
		return done, fmt.Errorf("refreshing secrets: %w", errors.Join(errs...))
	}
	return done, nil
}

// running reports whether state records sandbox name with a runtime.
func running(opts Options, name string) bool {
	for _, r := range opts.State.Resources {
		if r.Addr == addrs.SandboxRef(name) && r.Sandbox != nil && r.Sandbox.Runtime != nil {
			return true
		}
	}
	return false
}
