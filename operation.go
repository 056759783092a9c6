package sbx

import (
	"context"
	"errors"
	"time"

	"github.com/sbx-dev/sbx/internal/apply"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/operation"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"github.com/sbx-dev/sbx/policy"
)

// PlanOptions configure Config.Plan.
type PlanOptions struct {
	// LockTimeout is how long to wait for another sbx run holding the
	// state lock (sbx plan -lock-timeout); zero fails at once.
	LockTimeout time.Duration
	// NoRefresh takes the state as it is, without checking that the
	// sandboxes it records still run (sbx plan -refresh=false).
	NoRefresh bool
}

// Plan is what applying the configuration would change, computed against
// the state in its directory (.sbx/state.json), as sbx plan computes it.
// Apply executes it, and refuses it once the state, the configuration or
// the running sandboxes changed since.
type Plan struct {
	// Changes are the resources that would change, in address order;
	// resources that stay as they are are not listed.
	Changes []PlanChange
	// StateLineage and StateSerial identify the state the plan was
	// made against.
	StateLineage string
	StateSerial  uint64

	p *plan.Plan
}

// PlanChange is one resource a plan changes.
type PlanChange struct {
	// Address is the resource's address: "sandbox.web", "image.base".
	Address string
	// Action is "create", "update" (in place), "replace" or "delete".
	Action string
	// Reason says why, where the plan gives one (a sandbox whose VM
	// died is replaced).
	Reason string
	// Policy are a sandbox's policy differences, each classified as
	// widening or narrowing what the sandbox may do.
	Policy []policy.Change
}

// HasChanges reports whether applying p changes anything.
func (p *Plan) HasChanges() bool { return len(p.Changes) > 0 }

// Widens reports whether any policy change of p widens what a sandbox
// may do (sbx plan -fail-on-widen).
func (p *Plan) Widens() bool { return p.p != nil && p.p.Widens() }

// Plan computes what Apply would change to make the sandboxes match the
// configuration: it brings the lock up to date as Lock does, reads the
// state under its lock (without the lock where the directory has no
// state yet or the lock cannot be created on a read-only file system),
// checks that the sandboxes it records still run (unless
// opts.NoRefresh) and compares. It changes no sandbox and no state.
func (c *Config) Plan(ctx context.Context, opts PlanOptions) (*Plan, error) {
	lock, err := c.lockfile(ctx)
	if err != nil {
		return nil, err
	}
	p, ds := operation.PlanState(ctx, operation.NoHooks{}, c.Lang, lock, operation.StateReadOptions{
		Lock: true, Timeout: opts.LockTimeout, Refresh: !opts.NoRefresh,
	}, supervisor.RuntimeBase(c.opts.Environ))
	if err := ds.Err(); err != nil {
		return nil, err
	}
	out := &Plan{StateLineage: p.StateLineage, StateSerial: p.StateSerial, p: p}
	for _, ch := range p.Changes {
		if ch.Action == plan.NoOp {
			continue
		}
		out.Changes = append(out.Changes, PlanChange{
			Address: ch.Addr.String(), Action: string(ch.Action), Reason: ch.Reason, Policy: ch.Policy,
		})
	}
	return out, nil
}

// ApplyOptions configure Config.Apply.
type ApplyOptions struct {
	// LockTimeout is how long to wait for another sbx run holding the
	// state lock; zero fails at once.
	LockTimeout time.Duration
	// Parallelism bounds the sandboxes started or stopped at once; zero
	// means sbx apply's default.
	Parallelism int
	// SupervisorCommand is the program, and its first arguments, that
	// runs each sandbox's supervisor, which outlives this process: the
	// supervisor's directory is added as the last argument. Nil means
	// this executable with "supervise" (right for the sbx command and
	// for programs that hand that verb to it); any other program names
	// sbx here, e.g. {"/usr/local/bin/sbx", "supervise"}.
	SupervisorCommand []string
}

// ApplyResult counts what Apply did.
type ApplyResult struct {
	Created, Updated, Replaced, Destroyed int
	// Failed counts the changes that did not land; Skipped those not
	// tried (after an interruption, or because the image they need
	// failed to build).
	Failed, Skipped int
}

// Apply executes p, as sbx apply -plan does: under the state lock it
// plans again and refuses unless the plan is still p, then builds the
// images the changes need (recording their output hashes in the lock
// file), starts, replaces and stops sandboxes, and saves the state after
// each change, so an interrupted or failed apply leaves state that says
// what runs. Each sandbox runs under its own supervisor process (see
// ApplyOptions.SupervisorCommand), reachable later by sbx exec, sbx ps
// and sbx destroy, which gets its secrets' values from this process:
// read from the sources the bindings file (Options.Bindings) and the
// spec give them, a spec's command never; a secret left without a
// source fails Apply before anything changes. A p with no changes hands running sandboxes whose
// secrets changed their secrets again, and nothing else.
//
// The error lists every change that failed; the result counts what
// happened all the same.
func (c *Config) Apply(ctx context.Context, p *Plan, opts ApplyOptions) (ApplyResult, error) {
	if p == nil || p.p == nil {
		return ApplyResult{}, errors.New("sbx: Apply needs a plan made by Config.Plan")
	}
	lock, err := c.lockfile(ctx)
	if err != nil {
		return ApplyResult{}, err
	}
	binds, err := c.bindings()
	if err != nil {
		return ApplyResult{}, err
	}
	h := operation.NoHooks{}
	out, ds := operation.Apply(ctx, operation.ApplyRequest{
		Config:      c.Lang,
		Lock:        lock,
		Saved:       p.p,
		LockTimeout: opts.LockTimeout,
		Parallelism: opts.Parallelism,
		RuntimeBase: supervisor.RuntimeBase(c.opts.Environ),
		Spawn:       supervisor.SpawnOptions{Command: opts.SupervisorCommand, Env: c.opts.Environ},
		Bindings:    binds,
		Build: func(ctx context.Context, name string) (*image.Result, error) {
			return operation.BuildImage(ctx, c.env, h, c.Lang, lock, name, c.opts.ReadOnlyLock, nil)
		},
	}, h)
	res := applyResult(out.Result)
	return res, errors.Join(out.Err, ds.Err())
}

func applyResult(r apply.Result) ApplyResult {
	return ApplyResult{Created: r.Created, Updated: r.Updated, Replaced: r.Replaced, Destroyed: r.Destroyed, Failed: r.Failed, Skipped: r.Skipped}
}
