package command

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/internal/operation"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
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
			newView(env, noColor).usageError("destroy", "Missing directory", "-orphans needs the configuration's directory, as the path its sandboxes were started from (\"sbx ps -a\" shows it).")
			return ExitError
		}
		dir, names = pos[0], pos[1:]
	} else {
		dir, names = splitDirNames(pos)
	}
	v := newView(env, noColor)
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	base := supervisor.RuntimeBase(env.Environ)
	h := newHooks(ctx, env, v)
	h.out.verb = "Destroy"
	outcome, ds := operation.Destroy(ctx, operation.DestroyRequest{
		Dir: dir, Names: names, Orphans: orphans,
		LockTimeout: lockTimeout, AutoApprove: autoApprove, RuntimeBase: base,
	}, h)
	v.render(nil, ds)
	switch {
	case ds.HasErrors() || outcome.Cancelled:
		return ExitError
	case outcome.NothingToDo:
		if orphans {
			abs, _ := filepath.Abs(dir)
			v.println("Nothing to destroy: the runtime directory %s holds no sandboxes of %s.", base, abs)
		} else {
			v.println("Nothing to destroy: the state of %s records no sandboxes, and the runtime directory holds none of its.", dir)
		}
		return ExitOK
	}
	if orphans {
		fmt.Fprintf(env.Stderr, "\nThe state in %s was not read or changed. Once it can be read, \"sbx destroy\" or \"sbx apply\" brings it up to date.\n", state.Path(dir))
	}
	return h.exit
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
