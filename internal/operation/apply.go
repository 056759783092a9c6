package operation

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sbx-dev/sbx/internal/apply"
	"github.com/sbx-dev/sbx/internal/bindings"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"github.com/sbx-dev/sbx/internal/termtext"
	"github.com/sbx-dev/sbx/lang"
)

// ApplyRequest says what Apply applies, and how.
type ApplyRequest struct {
	// Config is the loaded configuration, Lock its lock (LockForApply).
	Config *lang.Config
	Lock   *lockfiles.Lock
	// Saved is a plan saved earlier (sbx plan -out), SavedPath its file
	// (for messages; empty for a plan that was never a file). With Saved, Apply refuses if the plan computed now
	// differs (SamePlan), and asks no confirmation: the saved plan was
	// the approval.
	Saved     *plan.Plan
	SavedPath string
	// Replan is the command that saves the plan again ("sbx plan -out
	// FILE DIR"), which the error about an out-of-date Saved says to run;
	// empty means "sbx plan -out SavedPath".
	Replan string
	// LockTimeout is how long to wait for another run holding the state
	// lock.
	LockTimeout time.Duration
	// AutoApprove applies without Hooks.Confirm.
	AutoApprove bool
	// Parallelism bounds the changes made at once; 0 means
	// apply.DefaultParallelism.
	Parallelism int
	// RuntimeBase is where sandboxes run (supervisor.RuntimeBase); Spawn
	// how their supervisors are started.
	RuntimeBase string
	Spawn       supervisor.SpawnOptions
	// Bindings is the user's bindings file (package bindings), which
	// says where this host reads each secret's value; nil means none.
	Bindings *bindings.File
	// Build builds one image of Config for a sandbox about to start (see
	// BuildImage for the default way).
	Build func(ctx context.Context, name string) (*image.Result, error)
}

// ApplyOutcome is what Apply did.
type ApplyOutcome struct {
	// Plan is the plan computed against the state; nil when Apply
	// stopped before it.
	Plan *plan.Plan
	// Cancelled says Hooks.Confirm refused: nothing changed.
	Cancelled bool
	// Applied says the changes were applied, as far as they went
	// (Hooks.Applied had the result and the error). With no changes to
	// make, it is false.
	Applied bool
	// Result and Err are what applying counted and returned.
	Result apply.Result
	Err    error
}

// Apply makes the sandboxes match req.Config, as sbx apply does, in this
// order: take the state lock for the whole run (waiting LockTimeout) and
// read the state; check the sandboxes it records still run
// (apply.Refresh); plan against it, with the sandboxes that run but are
// not in it (NotInState); with a saved plan, refuse unless it
// is the plan computed now; inspect the mounts and choose each secret's
// source (plan.SecretSources); with a secret that has no source this
// host may read (the spec names a command, which never runs, or
// nothing, and req.Bindings binds nothing), show the plan and stop with
// an error that says what to bind; show the plan (Hooks.ShowPlan); ask (Hooks.Confirm) unless AutoApprove or a saved
// plan; apply it (apply.Apply, which builds with req.Build, starts,
// replaces and stops sandboxes and saves the state after each change,
// reporting to Hooks.Progress); report the result (Hooks.Applied); and,
// once everything went through, hand running sandboxes whose secrets
// changed their secrets again. A plan with no changes is shown and the
// secrets refreshed, nothing else.
//
// Errors before applying are diagnostics, and nothing changed. Errors of
// applying are in the outcome (Err), for the caller to report with the
// counts; Apply's diagnostics then hold only what came after.
func Apply(ctx context.Context, req ApplyRequest, h Hooks) (ApplyOutcome, diags.Diagnostics) {
	var out ApplyOutcome
	cfg := req.Config
	lease, st, ds := LockState(ctx, cfg.Dir, req.LockTimeout)
	if ds.HasErrors() {
		return out, ds
	}
	defer lease.Close()
	apply.Refresh(ctx, st, req.RuntimeBase, cfg.Dir)
	desired, hd := plan.Desired(cfg, req.Lock)
	if ds = ds.Append(hd); ds.HasErrors() {
		return out, ds
	}
	p := plan.FromState(desired, st)
	ds = ds.Append(planRuntime(ctx, p, st, req.RuntimeBase, cfg.Dir))
	if req.Saved != nil {
		if err := SamePlan(req.Saved, p); err != nil {
			detail := fmt.Sprintf("%v. Plan again and review it.", err)
			if req.SavedPath != "" {
				replan := req.Replan
				if replan == "" {
					replan = "sbx plan -out " + req.SavedPath
				}
				detail = fmt.Sprintf("%s: %v.\nRun \"%s\" again and review it.", req.SavedPath, err, replan)
			}
			return out, ds.Append(diags.Sourceless(diags.Error, "The saved plan is out of date", detail))
		}
	}
	p.Mounts = plan.InspectMounts(ctx, cfg, plan.InspectOptions{Outside: true})
	p.Secrets = plan.SecretSources(cfg, req.Bindings)
	out.Plan = p
	// Every sandbox of the configuration is started, updated or has
	// its secrets read again below: one whose secret has no source this
	// host may read (a spec's command, which never runs) fails the
	// apply before anything changes.
	if d := unboundSecrets(cfg, req.Bindings); d != nil {
		if err := h.ShowPlan(p); err != nil {
			return out, ds.Append(diags.Errorf("Cannot print the plan: %v", err))
		}
		return out, ds.Append(d)
	}

	refresh := func() diags.Diagnostics {
		done, err := apply.RefreshSecrets(ctx, apply.Options{
			Config: cfg, Plan: p, State: st,
			RuntimeBase: req.RuntimeBase,
			Spawn:       req.Spawn,
			Bindings:    req.Bindings,
		})
		for _, addr := range done {
			h.Message(fmt.Sprintf("%s: secrets read again and handed to the running sandbox.", addr))
		}
		if err != nil {
			return diags.Diagnostics{diags.Sourceless(diags.Error, "Cannot refresh the secrets of a running sandbox", Quote(err.Error()))}
		}
		return nil
	}
	if !p.HasChanges() {
		h.Message("No changes. The sandboxes match the configuration.")
		if ds = ds.Append(refresh()); ds.HasErrors() {
			return out, ds
		}
		// The host files behind running sandboxes' mounts may have
		// changed all the same.
		if err := h.ShowPlan(p); err != nil {
			return out, ds.Append(diags.Errorf("Cannot print the plan: %v", err))
		}
		return out, ds.Append(recordOutputs(lease.Save, st, cfg, h))
	}
	if err := h.ShowPlan(p); err != nil {
		return out, ds.Append(diags.Errorf("Cannot print the plan: %v", err))
	}
	if req.Saved == nil && !req.AutoApprove {
		if !h.Confirm(ctx, "Do you want to apply these changes?", "sbx will make the changes above.") {
			out.Cancelled = true
			return out, ds
		}
	}
	h.Message("")
	parallelism := req.Parallelism
	if parallelism == 0 {
		parallelism = apply.DefaultParallelism
	}
	build := req.Build
	if build == nil {
		build = func(context.Context, string) (*image.Result, error) {
			return nil, fmt.Errorf("no way to build images was given")
		}
	}
	out.Result, out.Err = apply.Apply(ctx, apply.Options{
		Config:      cfg,
		Plan:        p,
		State:       st,
		Save:        lease.Save,
		Build:       build,
		RuntimeBase: req.RuntimeBase,
		Spawn:       req.Spawn,
		Bindings:    req.Bindings,
		Parallelism: parallelism,
		Progress:    h.Progress,
	})
	out.Applied = true
	h.Applied(out.Result, out.Err)
	if out.Err == nil && ctx.Err() == nil {
		if ds = ds.Append(refresh()); !ds.HasErrors() {
			ds = ds.Append(recordOutputs(lease.Save, st, cfg, h))
		}
	}
	return out, ds
}

// unboundSecrets returns an error for each secret of each sandbox of
// cfg that has no source this host may read (bindings.Choose), naming
// the sandbox; nil when there is none.
func unboundSecrets(cfg *lang.Config, f *bindings.File) diags.Diagnostics {
	var ds diags.Diagnostics
	for _, name := range slices.Sorted(maps.Keys(cfg.Sandboxes)) {
		sb := cfg.Sandboxes[name]
		for _, c := range bindings.ChooseAll(f, cfg.Dir, sb.Policy) {
			if c.Err != nil {
				ds = ds.Append(diags.Sourceless(diags.Error, fmt.Sprintf("%s cannot read secret.%s", sb.Addr(), c.Secret), c.Err.Error()))
			}
		}
	}
	return ds
}

// Quote renders text that sbx prints but does not control (a guest's,
// a supervisor's or a VM console's) for a terminal: control characters
// escaped and every line after the first under "  | ", so that none
// passes for sbx's own.
func Quote(text string) string { return termtext.Block(text, "  | ") }
