package command

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/apply"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"github.com/sbx-dev/sbx/lang"
)

const destroyUsage = `
Usage: sbx destroy [options] [DIR] [SANDBOX...]
       sbx destroy -orphans [options] DIR [SANDBOX...]

  Stop the sandboxes of the configuration in DIR (default: the current
  directory) and remove them from the state. With SANDBOX names, only
  those; without, every sandbox, and the images leave the state too
  (their files stay in the build cache).

  Destroy stops the sandboxes the state records and also those it does
  not: a sandbox's directory that sbx made in the runtime directory for
  this configuration but that the state does not record, as an apply
  that failed or was interrupted can leave ("sbx ps -a" shows them). The
  plan marks them "not in the state".

  With -orphans, destroy does not read the state: it stops every sandbox
  of the configuration it finds in the runtime directory (or the named
  ones) and leaves the state file as it is. Use it when the state is
  corrupt or lost, or for a configuration directory that was moved or
  deleted: DIR is then required, as the path the sandboxes were started
  from ("sbx ps -a" shows it).

  Each sandbox's supervisor stops its VM (the guest powers off; it is
  killed if it does not within its stop timeout). A sandbox whose
  supervisor died is cleaned up all the same: its VM is killed and its
  sockets and directory are removed. Destroy needs only the state, not a
  valid configuration.

  Destroy acts only on what sbx made: the supervisor directory sbx gives
  each sandbox (a state that records another is an error, and nothing is
  done there), the files sbx makes in it, and processes that run as you
  with exactly the command lines sbx gave the sandbox's supervisor and
  VM. The process ids the state records are only hints.

Options:

  -auto-approve       Destroy without asking. Needed when standard input
                      is not a terminal.
  -orphans            Find the sandboxes in the runtime directory only,
                      without reading the state, and leave the state file
                      unchanged.
  -lock-timeout=D     How long to wait for another sbx run holding the
                      state lock (e.g. 30s). Default 0: fail at once.
  -no-color           Print without colour.

Exit status: 0 destroyed (or nothing to destroy), 1 an error or a refused
confirmation, 130 interrupted.
`

func runDestroy(ctx context.Context, env *Env, args []string) int {
	var (
		autoApprove bool
		orphans     bool
		lockTimeout time.Duration
		noColor     bool
	)
	flags := newFlagSet("destroy")
	flags.BoolVar(&autoApprove, "auto-approve", false, "")
	flags.BoolVar(&orphans, "orphans", false, "")
	flags.DurationVar(&lockTimeout, "lock-timeout", 0, "")
	flags.BoolVar(&noColor, "no-color", false, "")
	pos, code, ok := parseArgs(env, flags, destroyUsage, args)
	if !ok {
		return code
	}
	var (
		dir   string
		names []string
	)
	if orphans {
		if len(pos) == 0 {
			fmt.Fprintln(env.Stderr, "sbx destroy: -orphans needs the configuration's directory, as the path its sandboxes were started from (\"sbx ps -a\" shows it)")
			return ExitError
		}
		dir, names = pos[0], pos[1:]
	} else {
		dir, names = splitDirNames(pos)
	}
	v := newView(env, noColor)
	abs, err := filepath.Abs(dir)
	if err != nil {
		v.errorf("%v", err)
		return ExitError
	}
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	var (
		lease *state.Lease
		st    *state.State
		save  func(*state.State) error
	)
	if orphans {
		// The state is not read, but a run that changes it is waited
		// for. A directory that is gone has no state and no run.
		if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
			if lease, ok = lockOnly(ctx, v, abs, lockTimeout); !ok {
				return ExitError
			}
		}
		st = &state.State{}
		save = func(*state.State) error { return nil }
	} else {
		if lease, st, ok = lockState(ctx, v, abs, lockTimeout); !ok {
			return ExitError
		}
		save = lease.Save
	}
	defer lease.Close()
	base := supervisor.RuntimeBase(env.Environ)
	found, err := supervisor.ListConfig(ctx, base, abs)
	if err != nil {
		v.errorDetail("Cannot look for the configuration's sandboxes", err.Error())
		return ExitError
	}
	p, ok := destroyPlan(v, st, found, names, orphans)
	if !ok {
		return ExitError
	}
	if !p.HasChanges() {
		if orphans {
			v.println("Nothing to destroy: the runtime directory %s holds no sandboxes of %s.", base, abs)
		} else {
			v.println("Nothing to destroy: the state of %s records no sandboxes, and the runtime directory holds none of its.", dir)
			if len(names) == 0 && !clearOutputValues(v, lease, st) {
				return ExitError
			}
		}
		return ExitOK
	}
	if err := plan.Render(env.Stdout, p, plan.RenderOptions{Color: v.colorOut, Width: int(v.width)}); err != nil {
		v.errorf("Cannot print the plan: %v", err)
		return ExitError
	}
	consequence := "sbx will stop the sandboxes above and remove them from the state."
	if orphans {
		consequence = "sbx will stop the sandboxes above; the state is not changed."
	}
	if !autoApprove && !confirm(ctx, env, v, "Do you really want to destroy these?", consequence) {
		return ExitError
	}
	v.println("")
	o := newApplyOutput(v)
	o.verb = "Destroy"
	res, err := apply.Apply(ctx, apply.Options{
		Config: &lang.Config{Dir: abs},
		Plan:   p,
		State:  st,
		Save:   save,
		Build: func(context.Context, string) (*image.Result, error) {
			return nil, fmt.Errorf("destroy builds nothing")
		},
		RuntimeBase: base,
		Progress:    o.progress,
	})
	code = o.finish(v, res, err, ctx.Err() != nil)
	if code == ExitOK && !orphans && len(names) == 0 && !clearOutputValues(v, lease, st) {
		code = ExitError
	}
	if orphans {
		fmt.Fprintf(env.Stderr, "\nThe state in %s was not read or changed. Once it can be read, \"sbx destroy\" or \"sbx apply\" brings it up to date.\n", state.Path(dir))
	}
	return code
}

// lockOnly takes the state lock of dir, waiting at most timeout for
// another sbx run, without reading the state.
func lockOnly(ctx context.Context, v *view, dir string, timeout time.Duration) (*state.Lease, bool) {
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	lease, err := state.Lock(lctx, dir)
	if err != nil {
		v.errorDetail("Cannot lock the state", err.Error())
		return nil, false
	}
	return lease, true
}

// splitDirNames splits [DIR] [SANDBOX...]: the first argument is the
// directory when it names one.
func splitDirNames(pos []string) (string, []string) {
	if len(pos) > 0 {
		if fi, err := os.Stat(pos[0]); err == nil && fi.IsDir() {
			return pos[0], pos[1:]
		}
	}
	return ".", pos
}

// destroyPlan is the plan that deletes the named sandboxes, or every
// resource when names is empty: those st records, and the sandboxes found
// in the runtime directory (supervisor.ListConfig) that it does not. With
// orphans, st is not read and only found sandboxes count. A name that is
// neither recorded nor found is an error listing those that are.
func destroyPlan(v *view, st *state.State, found []supervisor.Entry, names []string, orphans bool) (*plan.Plan, bool) {
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
			v.errorDetail(fmt.Sprintf("No sandbox %q to destroy", n), where+list+".")
			return nil, false
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
	return p, true
}
