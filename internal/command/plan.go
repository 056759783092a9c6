package command

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/operation"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

const planUsage = `
Usage: sbx plan [options] [DIR]

  Show what would change to make the sandboxes match the configuration in
  DIR (default: the current directory), and classify every policy change
  as widening or narrowing what a sandbox may do.

  By default the configuration is compared with what was last applied
  (DIR/.sbx/state.json, read under the state lock), after checking that
  the sandboxes it records still run: one whose supervisor or VM died is
  shown as to be replaced. With -against it is
  compared with another revision of itself instead, and no state is read:
  REV is a directory, or else a git revision of the repository holding DIR
  (the same directory at that revision); a name that is both is an error
  (write ./NAME for the directory). The other revision is loaded with
  the same variables and read with its own lock file. A revision with no
  lock file (this configuration or the other) is compared by its specs
  alone, and the plan says that its image inputs are unlocked.

  Plan never resolves or downloads anything: it reads sbx.lock.hcl as it
  is. If the lock file is missing pins the configuration needs (a new
  input, a changed source), that is an error: run "sbx lock" (and commit
  sbx.lock.hcl). A checkout under review cannot make plan contact a host
  it names, and plan reads no tool configuration of the checkout's (such
  as an .npmrc).

  Plan also shows, for each secret, where this host would read its value
  when a sandbox starts: the spec's env: or file: source, or your binding
  (a command as "command" only, never its text), or "!" for a secret left
  without a source. It reads no value and runs no command, not even a
  binding's. A binding is the host's, not the sandbox's: changing it
  changes no plan; "sbx apply" hands running sandboxes their secrets
  again.

` + bindingsHelp + `
  Plan writes nothing in DIR, so it works in a read-only checkout: where
  DIR has no .sbx there is no state and no lock is taken, and where the
  state lock cannot be created (a read-only file system) the state is read
  without it, with a note saying so.

Options:

  -out FILE           Save the plan to FILE (atomically, mode 0600;
                      nothing is written if planning fails or
                      -fail-on-widen fails), for "sbx show FILE" and apply.
  -json               Print the plan as JSON (see docs/plan-json.md) instead
                      of text.
  -detailed-exitcode  Exit 0 when there are no changes, 2 when there are.
  -fail-on-widen      Exit 1 if any policy change widens what a sandbox may
                      do. This takes precedence over -detailed-exitcode.
  -against REV|DIR    Compare with another revision instead of the state.
  -lockfile=readonly  Accepted for scripts: plan never updates
                      sbx.lock.hcl.
  -lock=false         Read the state without taking the state lock.
  -lock-timeout=D     How long to wait for another sbx run holding the
                      state lock (e.g. 30s). Default 0: fail at once.
  -refresh=false      Do not check that the sandboxes the state records
                      still run; take the state as it is.
` + varUsage + `  -no-color           Print without colour.

Exit status: 0 success (with -detailed-exitcode: no changes), 1 an error
or, with -fail-on-widen, a widening change, 2 changes present (only with
-detailed-exitcode).
`

type planArgs struct {
	dir         string
	out         string
	json        bool
	detailed    bool
	failOnWiden bool
	against     string
	lockfile    lockfileMode
	vars        varFlags
	stateLock   bool
	lockTimeout time.Duration
	refresh     bool
	noColor     bool
}

func runPlan(ctx context.Context, env *Env, args []string) int {
	var a planArgs
	flags := newFlagSet("plan")
	flags.StringVar(&a.out, "out", "", "")
	flags.BoolVar(&a.json, "json", false, "")
	flags.BoolVar(&a.detailed, "detailed-exitcode", false, "")
	flags.BoolVar(&a.failOnWiden, "fail-on-widen", false, "")
	flags.StringVar(&a.against, "against", "", "")
	flags.Var(&a.lockfile, "lockfile", "")
	flags.BoolVar(&a.stateLock, "lock", true, "")
	flags.DurationVar(&a.lockTimeout, "lock-timeout", 0, "")
	flags.BoolVar(&a.refresh, "refresh", true, "")
	a.vars.register(flags)
	flags.BoolVar(&a.noColor, "no-color", false, "")
	pos, code, ok := parseArgs(env, flags, planUsage, args)
	if !ok {
		return code
	}
	if a.dir, ok = dirArg(env, "plan", pos); !ok {
		return ExitError
	}
	v := newView(env, a.noColor)
	// With -json, stdout carries the plan and nothing else.
	report := v
	if a.json {
		r := *v
		r.stdout, r.colorOut = env.Stderr, r.colorErr
		report = &r
	}

	cfg, ld := lang.Load(a.dir, a.vars.options(env))
	v.diagnostics(sources(cfg), ld)
	if ld.HasErrors() {
		return ExitError
	}
	binds, ok := loadBindings(report, env)
	if !ok {
		return ExitError
	}
	// Plan resolves nothing (planLock): a lock file must come with the
	// checkout. Compared with another revision, a checkout with no lock
	// file is compared by its specs.
	var lock *lockfiles.Lock
	unlocked := false
	if a.against != "" {
		var ds diags.Diagnostics
		unlocked, ds = operation.LockMissing(cfg)
		report.render(nil, ds)
		if ds.HasErrors() {
			return ExitError
		}
	}
	if !unlocked {
		var (
			files map[string]*hcl.File
			ds    diags.Diagnostics
		)
		lock, files, ds = operation.LockForPlan(cfg)
		report.render(files, ds)
		if ds.HasErrors() {
			return failedOrInterrupted(ctx, env, "nothing was planned")
		}
	}

	var p *plan.Plan
	if a.against != "" {
		p, ok = planAgainst(ctx, env, v, a, plan.Side{Config: cfg, Lock: lock, Unlocked: unlocked})
	} else {
		opts := operation.StateReadOptions{Lock: a.stateLock, Timeout: a.lockTimeout, Refresh: a.refresh}
		var ds diags.Diagnostics
		p, ds = operation.PlanState(ctx, newHooks(ctx, env, report), cfg, lock, opts, supervisor.RuntimeBase(env.Environ))
		report.render(cfg.Sources, ds)
		ok = !ds.HasErrors()
	}
	if !ok {
		return failedOrInterrupted(ctx, env, "nothing was planned")
	}
	// What the mounts show of the checkout now: hidden files and
	// unhidden secrets, shown with the plan and saved in it.
	p.Mounts = plan.InspectMounts(ctx, cfg, plan.InspectOptions{})
	// Where this host would read each secret: chosen, never read.
	p.Secrets = plan.SecretSources(cfg, binds)

	if a.json {
		data, err := p.MarshalJSON()
		if err != nil {
			v.errorf("Cannot encode the plan as JSON: %v", err)
			return ExitError
		}
		env.Stdout.Write(append(data, '\n'))
	} else if err := plan.Render(env.Stdout, p, plan.RenderOptions{Color: v.colorOut, Width: int(v.width)}); err != nil {
		v.errorf("Cannot print the plan: %v", err)
		return ExitError
	}

	if a.failOnWiden && p.Widens() {
		v.errorDetail("The plan widens sandbox policy (-fail-on-widen)", widenDetail(p))
		return ExitError
	}
	if a.out != "" {
		if err := plan.WriteFile(a.out, p); err != nil {
			v.errorDetail("Cannot save the plan", err.Error())
			return ExitError
		}
		report.println("\nSaved the plan to %s. Run \"sbx show %s\" to see it again.", a.out, a.out)
	}
	if a.detailed && p.HasChanges() {
		return ExitChanges
	}
	return ExitOK
}

// lockForPlan returns the lock that building, running and applying use
// (operation.LockForApply), printing its diagnostics and the pins it
// changed (followed by an empty line).
func lockForPlan(ctx context.Context, env *Env, v *view, cfg *lang.Config, readonly bool) (*lockfiles.Lock, bool) {
	res, ds := operation.LockForApply(ctx, env.pipeline(), newHooks(ctx, env, v), cfg, readonly)
	if !reportLock(v, res, ds) {
		return nil, false
	}
	if res.Wrote {
		v.println("")
	}
	return res.Lock, true
}

// planAgainst plans the configuration of side against another revision of
// it (operation.PlanAgainst), printing its diagnostics.
func planAgainst(ctx context.Context, env *Env, v *view, a planArgs, side plan.Side) (*plan.Plan, bool) {
	p, sections := operation.PlanAgainst(ctx, env.Environ, a.dir, a.against, a.vars.options(env), side)
	for _, s := range sections {
		if s.Heading != "" {
			fmt.Fprintln(env.Stderr, s.Heading)
		}
		v.render(s.Files, s.Diags)
	}
	return p, p != nil
}

// widenDetail lists the widening policy changes of p, one per line.
func widenDetail(p *plan.Plan) string {
	var b strings.Builder
	b.WriteString("These changes let a sandbox do something it could not before:\n")
	for _, c := range p.Changes {
		for _, pc := range c.Policy {
			if pc.Direction != policy.Widen {
				continue
			}
			fmt.Fprintf(&b, "  %s: %s", c.Addr, pc.Detail)
			if o := originText(pc.Origin); o != "" {
				fmt.Fprintf(&b, " (%s)", o)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\nReview them, then plan without -fail-on-widen to accept them.")
	return b.String()
}

func originText(o policy.Origin) string {
	switch {
	case o.File != "" && o.Line > 0:
		return fmt.Sprintf("%s, %s:%d", o.Block, o.File, o.Line)
	case o.File != "":
		return o.Block + ", " + o.File
	}
	return o.Block
}
