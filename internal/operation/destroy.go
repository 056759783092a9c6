package operation

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/apply"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"github.com/sbx-dev/sbx/lang"
)

// DestroyRequest says what Destroy stops.
type DestroyRequest struct {
	// Dir is the configuration's directory.
	Dir string
	// Names are the sandboxes to destroy ("NAME" or "sandbox.NAME");
	// empty means every sandbox, and the images leave the state too.
	Names []string
	// Orphans finds the sandboxes in the runtime directory only, without
	// reading the state, and leaves the state file as it is.
	Orphans bool
	// LockTimeout is how long to wait for another run holding the state
	// lock.
	LockTimeout time.Duration
	// AutoApprove destroys without Hooks.Confirm.
	AutoApprove bool
	// RuntimeBase is where the sandboxes run (supervisor.RuntimeBase).
	RuntimeBase string
}

// DestroyOutcome is what Destroy did.
type DestroyOutcome struct {
	// Plan is the destroy plan; nil when none was made.
	Plan *plan.Plan
	// NothingToDo says there was nothing to destroy.
	NothingToDo bool
	// Cancelled says Hooks.Confirm refused.
	Cancelled bool
	// Applied says the plan was applied (Hooks.Applied was called with
	// the result).
	Applied bool
}

// Destroy stops the sandboxes of the configuration in req.Dir and
// removes them from the state, as sbx destroy does: it takes the state
// lock (with Orphans only the lock, and only where Dir exists), lists the
// configuration's sandboxes in the runtime directory, plans their
// deletion (DestroyPlan), shows the plan, asks (unless AutoApprove) and
// applies it. Destroy needs no configuration, only the state.
func Destroy(ctx context.Context, req DestroyRequest, h Hooks) (DestroyOutcome, diags.Diagnostics) {
	var out DestroyOutcome
	abs, err := filepath.Abs(req.Dir)
	if err != nil {
		return out, diags.Diagnostics{}.Append(diags.Errorf("%v", err))
	}
	var (
		lease *state.Lease
		st    *state.State
		save  func(*state.State) error
		ds    diags.Diagnostics
	)
	if req.Orphans {
		// The state is not read, but a run that changes it is waited
		// for. A directory that is gone has no state and no run.
		if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
			if lease, ds = LockOnly(ctx, abs, req.LockTimeout); ds.HasErrors() {
				return out, ds
			}
		}
		st = &state.State{}
		save = func(*state.State) error { return nil }
	} else {
		if lease, st, ds = LockState(ctx, abs, req.LockTimeout); ds.HasErrors() {
			return out, ds
		}
		save = lease.Save
	}
	defer lease.Close()
	found, err := supervisor.ListConfig(ctx, req.RuntimeBase, abs)
	if err != nil {
		return out, diags.Diagnostics{diags.Sourceless(diags.Error, "Cannot look for the configuration's sandboxes", err.Error())}
	}
	p, ds := DestroyPlan(st, found, req.Names, req.Orphans)
	if ds.HasErrors() {
		return out, ds
	}
	out.Plan = p
	if !p.HasChanges() {
		out.NothingToDo = true
		if !req.Orphans && len(req.Names) == 0 {
			return out, clearOutputs(save, st)
		}
		return out, nil
	}
	if err := h.ShowPlan(p); err != nil {
		return out, diags.Diagnostics{diags.Errorf("Cannot print the plan: %v", err)}
	}
	consequence := "sbx will stop the sandboxes above and remove them from the state."
	if req.Orphans {
		consequence = "sbx will stop the sandboxes above; the state is not changed."
	}
	if !req.AutoApprove && !h.Confirm(ctx, "Do you really want to destroy these?", consequence) {
		out.Cancelled = true
		return out, nil
	}
	h.Message("")
	res, err := apply.Apply(ctx, apply.Options{
		Config: &lang.Config{Dir: abs},
		Plan:   p,
		State:  st,
		Save:   save,
		Build: func(context.Context, string) (*image.Result, error) {
			return nil, fmt.Errorf("destroy builds nothing")
		},
		RuntimeBase: req.RuntimeBase,
		Progress:    h.Progress,
	})
	out.Applied = true
	h.Applied(res, err)
	if err == nil && ctx.Err() == nil && !req.Orphans && len(req.Names) == 0 {
		return out, clearOutputs(save, st)
	}
	return out, nil
}

// DestroyPlan is the plan that deletes the named sandboxes, or every
// resource when names is empty: those st records, and the sandboxes found
// in the runtime directory (supervisor.ListConfig) that it does not. With
// orphans, st is not read and only found sandboxes count. A name that is
// neither recorded nor found is an error listing those that are.
func DestroyPlan(st *state.State, found []supervisor.Entry, names []string, orphans bool) (*plan.Plan, diags.Diagnostics) {
	p := &plan.Plan{Against: "state", StateLineage: st.Lineage, StateSerial: st.Serial}
	byAddr := map[addrs.Ref]*plan.ResourceChange{}
	var known []string
	for _, r := range st.Resources {
		byAddr[r.Addr] = &plan.ResourceChange{Addr: r.Addr, Action: plan.Delete, Before: r}
		if r.Sandbox != nil {
			known = append(known, r.Addr.Name)
		}
	}
	for _, e := range found {
		addr := addrs.SandboxRef(e.Name)
		if byAddr[addr] != nil {
			continue
		}
		why := "it is not in the state (an apply that failed or was interrupted left it)"
		if orphans {
			why = "it is in the runtime directory"
		}
		if e.Liveness.Running {
			why += " and it runs"
		} else if e.Liveness.Gone != "" {
			why += ": " + e.Liveness.Gone
		}
		byAddr[addr] = &plan.ResourceChange{Addr: addr, Action: plan.Delete, Reason: why}
		known = append(known, e.Name)
	}
	if len(names) == 0 {
		for _, c := range byAddr {
			p.Changes = append(p.Changes, c)
		}
	}
	for _, n := range names {
		c := byAddr[addrs.SandboxRef(strings.TrimPrefix(n, "sandbox."))]
		if c == nil {
			slices.Sort(known)
			list := "none"
			if len(known) > 0 {
				list = strings.Join(known, ", ")
			}
			where := "The state records these sandboxes, or the runtime directory holds them: "
			if orphans {
				where = "The runtime directory holds these sandboxes of the configuration: "
			}
			return nil, diags.Diagnostics{diags.Sourceless(diags.Error, fmt.Sprintf("No sandbox %q to destroy", n), where+list+".")}
		}
		if !slices.Contains(p.Changes, c) {
			p.Changes = append(p.Changes, c)
		}
	}
	slices.SortFunc(p.Changes, func(x, y *plan.ResourceChange) int {
		switch {
		case x.Addr.Less(y.Addr):
			return -1
		case y.Addr.Less(x.Addr):
			return 1
		}
		return 0
	})
	return p, nil
}
