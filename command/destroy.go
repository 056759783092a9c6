package command

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/apply"
	"github.com/sbx-dev/sbx/builders/image"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/plan"
	"github.com/sbx-dev/sbx/state"
	"github.com/sbx-dev/sbx/supervisor"
)

const destroyUsage = `
Usage: sbx destroy [options] [DIR] [SANDBOX...]

  Stop the sandboxes of the configuration in DIR (default: the current
  directory) that the state records, and remove them from the state. With
  SANDBOX names, only those; without, every sandbox, and the images leave
  the state too (their files stay in the build cache).

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
  -lock-timeout=D     How long to wait for another sbx run holding the
                      state lock (e.g. 30s). Default 0: fail at once.
  -no-color           Print without colour.

Exit status: 0 destroyed (or nothing to destroy), 1 an error or a refused
confirmation, 130 interrupted.
`

func runDestroy(ctx context.Context, env *Env, args []string) int {
	var (
		autoApprove bool
		lockTimeout time.Duration
		noColor     bool
	)
	flags := newFlagSet("destroy")
	flags.BoolVar(&autoApprove, "auto-approve", false, "")
	flags.DurationVar(&lockTimeout, "lock-timeout", 0, "")
	flags.BoolVar(&noColor, "no-color", false, "")
	pos, code, ok := parseArgs(env, flags, destroyUsage, args)
	if !ok {
		return code
	}
	dir, names := splitDirNames(pos)
	v := newView(env, noColor)
	abs, err := filepath.Abs(dir)
	if err != nil {
		v.errorf("%v", err)
		return ExitError
	}
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	lease, st, ok := lockState(ctx, v, abs, lockTimeout)
	if !ok {
		return ExitError
	}
	defer lease.Close()
	p, ok := destroyPlan(v, st, names)
	if !ok {
		return ExitError
	}
	if !p.HasChanges() {
		v.println("Nothing to destroy: the state of %s records no sandboxes.", dir)
		return ExitOK
	}
	if err := plan.Render(env.Stdout, p, plan.RenderOptions{Color: v.colorOut, Width: int(v.width)}); err != nil {
		v.errorf("Cannot print the plan: %v", err)
		return ExitError
	}
	if !autoApprove && !confirm(ctx, env, v, "Do you really want to destroy these?", "sbx will stop the sandboxes above and remove them from the state.") {
		return ExitError
	}
	v.println("")
	o := newApplyOutput(v)
	o.verb = "Destroy"
	res, err := apply.Apply(ctx, apply.Options{
		Config: &lang.Config{Dir: abs},
		Plan:   p,
		State:  st,
		Save:   lease.Save,
		Build: func(context.Context, string) (*image.Result, error) {
			return nil, fmt.Errorf("destroy builds nothing")
		},
		RuntimeBase: supervisor.RuntimeBase(env.Environ),
		Progress:    o.progress,
	})
	return o.finish(v, res, err, ctx.Err() != nil)
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

// destroyPlan is the plan that deletes the named sandboxes from st, or
// every resource when names is empty. A name that state does not record
// is an error listing those it does.
func destroyPlan(v *view, st *state.State, names []string) (*plan.Plan, bool) {
	p := &plan.Plan{Against: "state", StateLineage: st.Lineage, StateSerial: st.Serial}
	del := func(r *state.Resource) {
		p.Changes = append(p.Changes, &plan.ResourceChange{Addr: r.Addr, Action: plan.Delete, Before: r})
	}
	if len(names) == 0 {
		for _, r := range st.Resources {
			del(r)
		}
		return p, true
	}
	for _, n := range names {
		r := st.Lookup(addrs.SandboxRef(strings.TrimPrefix(n, "sandbox.")))
		if r == nil {
			var have []string
			for _, r := range st.Resources {
				if r.Sandbox != nil {
					have = append(have, r.Addr.Name)
				}
			}
			known := "none"
			if len(have) > 0 {
				known = strings.Join(have, ", ")
			}
			v.errorDetail(fmt.Sprintf("No sandbox %q in the state", n), "The state records these sandboxes: "+known+".")
			return nil, false
		}
		del(r)
	}
	return p, true
}
