package command

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/apply"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/operation"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"github.com/sbx-dev/sbx/internal/termtext"
	"golang.org/x/term"
)

const applyUsage = `
Usage: sbx apply [options] [DIR]

  Make the sandboxes match the configuration in DIR (default: the current
  directory): plan as "sbx plan" does, show the plan, ask for
  confirmation, then build the images and start, replace or stop the
  sandboxes. Each sandbox runs under its own supervisor process, which
  outlives sbx; "sbx exec", "sbx cp", "sbx logs", "sbx ps" and
  "sbx destroy" reach it later.

  Before planning, the sandboxes recorded in DIR/.sbx/state.json are
  checked against the processes that run them: a sandbox whose supervisor
  or VM died is re-created, and whatever it left running is stopped.

  The state is locked for the whole run (a second apply waits for
  -lock-timeout, then fails) and saved after every change, so an
  interrupted or failed apply leaves state that says what runs.
  Interrupting sbx (Ctrl-C) finishes no new change: sandboxes being
  started are stopped, the state is saved, and sbx exits with 130.

  The values of the sandboxes' secrets are read in this process and
  handed to each supervisor through a pipe; every sandbox's secrets are
  read again on each apply, so a rotated value or a new binding reaches
  running sandboxes without a restart. A secret left without a source
  this host may read stops apply before anything changes.

` + bindingsHelp + `
Options:

  -auto-approve       Apply without asking. Needed when standard input is
                      not a terminal.
  -plan FILE          Apply the plan saved with "sbx plan -out FILE"
                      without asking; refused if the state, the
                      configuration or the running sandboxes changed since.
  -parallelism N      Start or stop at most N sandboxes at once (default 4).
  -lockfile=readonly  Never update sbx.lock.hcl; fail if it is not up to
                      date.
  -lock-timeout=D     How long to wait for another sbx run holding the
                      state lock (e.g. 30s). Default 0: fail at once.
  -cold               Boot the sandboxes it starts rather than resume them
                      from the machine saved for their shape
                      (docs/warm-starts.md).
` + varUsage + `  -no-color           Print without colour.

  Supervisors keep their sockets under $SBX_RUNTIME_DIR, else
  $XDG_RUNTIME_DIR/sbx, else ~/.local/state/sbx/run (or
  $XDG_STATE_HOME/sbx/run) when short enough for socket paths, else
  sbx-UID in the temporary directory; each must be yours, mode 0700.

Exit status: 0 applied (or nothing to do), 1 an error or a refused
confirmation, 130 interrupted.
`

type applyArgs struct {
	dir         string
	autoApprove bool
	planFile    string
	parallelism int
	lockfile    lockfileMode
	vars        varFlags
	lockTimeout time.Duration
	cold        bool
	noColor     bool
}

func runApply(ctx context.Context, env *Env, args []string) int {
	var a applyArgs
	flags := newFlagSet("apply")
	flags.BoolVar(&a.autoApprove, "auto-approve", false, "")
	flags.StringVar(&a.planFile, "plan", "", "")
	flags.IntVar(&a.parallelism, "parallelism", apply.DefaultParallelism, "")
	flags.Var(&a.lockfile, "lockfile", "")
	flags.DurationVar(&a.lockTimeout, "lock-timeout", 0, "")
	flags.BoolVar(&a.cold, "cold", false, "")
	a.vars.register(flags)
	flags.BoolVar(&a.noColor, "no-color", false, "")
	pos, code, ok := parseArgs(env, flags, applyUsage, args)
	if !ok {
		return code
	}
	if a.dir, ok = dirArg(env, "apply", pos); !ok {
		return ExitError
	}
	if a.parallelism < 1 {
		newView(env, a.noColor).usageError("apply", "Invalid -parallelism", fmt.Sprintf("-parallelism must be at least 1, got %d.", a.parallelism))
		return ExitError
	}
	v := newView(env, a.noColor)

	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	cfg, ok := loadConfig(v, a.dir, a.vars.options(env))
	if !ok {
		return ExitError
	}
	binds, ok := loadBindings(v, env)
	if !ok {
		return ExitError
	}
	readonly := a.lockfile == "readonly" || a.planFile != ""
	lock, ok := lockForPlan(ctx, env, v, cfg, readonly)
	if !ok {
		return ExitError
	}
	var saved *plan.Plan
	if a.planFile != "" {
		var err error
		if saved, err = plan.ReadFile(a.planFile); err != nil {
			v.errorDetail("Cannot read the saved plan", err.Error())
			return ExitError
		}
	}

	var snapshots string
	if !a.cold {
		var err error
		if snapshots, err = pipeline.SnapshotDir(pipeline.Env{Environ: env.Environ}); err != nil {
			v.errorDetail("Cannot find the snapshot cache", err.Error())
			return ExitError
		}
	}
	h := newHooks(ctx, env, v)
	outcome, ds := operation.Apply(ctx, operation.ApplyRequest{
		Config:      cfg,
		Lock:        lock,
		Saved:       saved,
		SavedPath:   a.planFile,
		Replan:      shellJoin([]string{"sbx", "plan", "-out", a.planFile, a.dir}),
		LockTimeout: a.lockTimeout,
		AutoApprove: a.autoApprove,
		Parallelism: a.parallelism,
		RuntimeBase: supervisor.RuntimeBase(env.Environ),
		Spawn:       supervisor.SpawnOptions{Env: env.Environ, Snapshots: snapshots},
		Bindings:    binds,
		Build: func(ctx context.Context, name string) (*image.Result, error) {
			return buildOne(ctx, env, v, cfg, lock, name, a.lockfile == "readonly")
		},
	}, h)
	v.render(cfg.Sources, ds)
	switch {
	case outcome.Applied && h.exit != ExitOK:
		return h.exit
	case ds.HasErrors() || outcome.Cancelled:
		return ExitError
	}
	return ExitOK
}

// confirm asks a yes/no question on the terminal. Without a terminal on
// standard input it refuses, saying how to approve instead.
func confirm(ctx context.Context, env *Env, v *view, question, consequence string) bool {
	f, isFile := env.Stdin.(*os.File)
	if !isFile || !term.IsTerminal(int(f.Fd())) {
		v.errorDetail("No confirmation", "Standard input is not a terminal, so sbx cannot ask. Pass -auto-approve to go ahead without asking.")
		return false
	}
	fmt.Fprintf(env.Stdout, "\n%s\n  %s\n  Only 'yes' will be accepted.\n\n  Enter a value: ", v.bold(question), consequence)
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(env.Stdin).ReadString('\n')
		answer <- strings.TrimSpace(line)
	}()
	select {
	case s := <-answer:
		if s == "yes" {
			return true
		}
		fmt.Fprintln(env.Stderr, "\nCancelled: nothing was changed.")
		return false
	case <-ctx.Done():
		fmt.Fprintln(env.Stderr, "\nInterrupted: nothing was changed.")
		return false
	}
}

// applyOutput prints apply's progress, one line per change starting and
// ending, from several goroutines.
type applyOutput struct {
	mu   sync.Mutex
	w    io.Writer
	verb string // "Apply" or "Destroy"
	// still stops the "Still creating..." line of each change in flight.
	still map[addrs.Ref]chan struct{}
}

// stillEvery is how often a change in flight says it still runs.
const stillEvery = 10 * time.Second

func newApplyOutput(v *view) *applyOutput {
	return &applyOutput{w: v.stdout, verb: "Apply", still: map[addrs.Ref]chan struct{}{}}
}

var (
	actionStarting = map[plan.Action]string{plan.Create: "Creating...", plan.Replace: "Replacing...", plan.Update: "Updating in place...", plan.Delete: "Destroying..."}
	actionDone     = map[plan.Action]string{plan.Create: "Created", plan.Replace: "Replaced", plan.Update: "Updated", plan.Delete: "Destroyed"}
)

func (o *applyOutput) progress(e apply.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !e.Done {
		what := actionStarting[e.Action]
		if e.Addr.Kind == addrs.Image && e.Action != plan.Delete {
			what = "Building..." // the build's own progress follows
		} else {
			stop := make(chan struct{})
			o.still[e.Addr] = stop
			go o.stillRunning(e, stop)
		}
		fmt.Fprintf(o.w, "%s: %s\n", e.Addr, what)
		return
	}
	if stop, ok := o.still[e.Addr]; ok {
		close(stop)
		delete(o.still, e.Addr)
	}
	if e.Err != nil {
		fmt.Fprintf(o.w, "%s: Failed after %s\n", e.Addr, roundDuration(e.Took))
		return
	}
	detail := ""
	if rt := e.Runtime; rt != nil {
		detail = fmt.Sprintf(" [supervisor pid %d, QEMU pid %d, %s]", rt.Pid, rt.QEMUPid, termtext.Line(rt.Accel))
	}
	what := actionDone[e.Action]
	if e.Addr.Kind == addrs.Image && e.Action == plan.Delete {
		what = "Removed from state (its files stay in the build cache)"
	}
	fmt.Fprintf(o.w, "%s: %s after %s%s\n", e.Addr, what, roundDuration(e.Took), detail)
}

// stillRunning says every stillEvery that change e is still in flight,
// until stop is closed.
func (o *applyOutput) stillRunning(e apply.Event, stop <-chan struct{}) {
	verb := strings.ToLower(strings.TrimSuffix(actionStarting[e.Action], "..."))
	begin := time.Now()
	tick := time.NewTicker(stillEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			o.mu.Lock()
			select {
			case <-stop:
			default:
				fmt.Fprintf(o.w, "%s: Still %s... [%s elapsed]\n", e.Addr, verb, time.Since(begin).Round(time.Second))
			}
			o.mu.Unlock()
		}
	}
}

// finish prints the outcome and returns the exit code.
func (o *applyOutput) finish(v *view, res apply.Result, err error, interrupted bool) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		for _, e := range unjoin(err) {
			if !errors.Is(e, context.Canceled) {
				// A sandbox that failed to start quotes its
				// supervisor and the VM's console.
				v.errorFrom("Apply failed", e, true)
			}
		}
	}
	// What happened, as apply counted it: a replace that stopped the old
	// sandbox but did not start the new one counts as destroyed.
	summary := fmt.Sprintf("%d created, %d updated, %d replaced, %d destroyed", res.Created, res.Updated, res.Replaced, res.Destroyed)
	if o.verb == "Destroy" {
		summary = fmt.Sprintf("%d destroyed", res.Destroyed)
	}
	switch {
	case interrupted:
		fmt.Fprintf(o.w, "\nInterrupted: %s; %d not done. The state records what runs.\n", summary, res.Skipped+res.Failed)
		return ExitInterrupted
	case err != nil:
		fmt.Fprintf(o.w, "\n%s incomplete: %s; %d failed, %d not done. The state records what runs.\n", o.verb, summary, res.Failed, res.Skipped)
		return ExitError
	}
	fmt.Fprintf(o.w, "\n%s %s.\n", v.bold(o.verb+" complete!"), summary)
	return ExitOK
}

// unjoin flattens errors.Join trees.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}

func roundDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
