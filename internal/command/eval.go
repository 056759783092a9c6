package command

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/internal/fanout"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/sandbox"
)

const evalUsage = `
Usage: sbx eval [options] [DIR] SANDBOX -- COMMAND [ARG...]

  Run COMMAND in -n fresh VMs of SANDBOX from the configuration in DIR
  (default: the current directory), at most -p at once, and keep what
  each run did in the results directory named by -results: its exit
  code, standard output and error, durations, and the files it changed.

  Each run gets its own copy of every read-write workspace mount's host
  directory (reflinked where the file system can, else copied; the
  mount's hidden and tmpfs paths are never copied), so runs never see
  each other's changes and the host's tree is never written. Its command
  gets SBX_RUN (0 to N-1) and SBX_RUNS (N) in its environment.

  Each run's result (exit code, duration, how many paths it changed) is
  printed on standard output as the run finishes, then how many runs
  finished. The results directory gets index.jsonl, one JSON line per
  finished run, written and synced as each run finishes, and runs/N/
  with stdout, stderr, changes.tar (the files the run added or
  modified), changes.diff (a unified diff of its text files) and its
  egress audit log. docs/eval.md describes them.

  Interrupting sbx (Ctrl-C) kills every running command and stops every
  VM; the runs that had finished stay in the index, the others leave
  nothing. sbx exits 0 when every run's command ran (whatever its exit
  code), 1 when a run could not run it or the eval could not start, 130
  when interrupted.

` + bindingsHelp + `
Options:

  -n N                How many runs (default 1).
  -p P                How many run at once at most (default 1).
  -results DIR        Where the results go: a new or empty directory.
                      Required.
  -u USER             Run as USER (a name or uid in the image, or uid:gid).
                      Default: the sandbox's user, else root.
  -e KEY=VALUE        Set an environment variable; may be repeated. The
                      image's and the sandbox's env come first.
  -w DIR              Working directory in the guest, an absolute path.
                      Default: the user's home directory.
  -i                  Read standard input to its end and give it to every
                      run.
  -timeout DURATION   Kill a run's command if it runs longer (e.g. 10m);
                      the run is recorded with status "timeout".
  -boot-timeout DURATION
                      How long each VM may take to boot (default 2m).
  -cold               Boot every VM rather than resume them from the
                      machine saved for their shape, whose memory they
                      share (docs/warm-starts.md).
  -lockfile=readonly  Never update sbx.lock.hcl; fail if it is not up to
                      date.
` + varUsage + `  -no-color           Print without colour.
`

// maxEvalStdin bounds what -i reads.
const maxEvalStdin = 64 << 20

type evalArgs struct {
	guestArgs
	runs, parallel int
	results        string
	bootTimeout    time.Duration
	cold           bool
	lockfile       lockfileMode
	vars           varFlags
	noColor        bool
}

func runEval(ctx context.Context, env *Env, args []string) int {
	var a evalArgs
	flags := newFlagSet("eval")
	flags.IntVar(&a.runs, "n", 1, "")
	flags.IntVar(&a.parallel, "p", 1, "")
	flags.StringVar(&a.results, "results", "", "")
	flags.StringVar(&a.user, "u", "", "")
	flags.Var(&a.env, "e", "")
	flags.StringVar(&a.workdir, "w", "", "")
	flags.BoolVar(&a.stdin, "i", false, "")
	flags.DurationVar(&a.timeout, "timeout", 0, "")
	flags.DurationVar(&a.bootTimeout, "boot-timeout", machine.DefaultBootTimeout, "")
	flags.BoolVar(&a.cold, "cold", false, "")
	flags.Var(&a.lockfile, "lockfile", "")
	a.vars.register(flags)
	flags.BoolVar(&a.noColor, "no-color", false, "")
	if code, ok := a.parse(env, "eval", evalUsage, flags, args); !ok {
		return code
	}
	if a.results == "" {
		newView(env, a.noColor).usageError("eval", "Missing -results", "Name the results directory with -results DIR.")
		return ExitError
	}

	quiet := *env
	quiet.Stdout = env.Stderr
	v := newView(&quiet, a.noColor)

	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	cfg, sb, ok := loadSandbox(v, a.dir, a.vars.options(env), a.sandbox)
	if !ok {
		return ExitError
	}
	if !a.checkEnv(v, "eval", sb.Policy) {
		return ExitError
	}
	binds, ok := checkSecrets(v, env, cfg, sb)
	if !ok {
		return ExitError
	}
	user := a.user
	if user == "" {
		user = sb.User
	}
	opts := fanout.Options{
		Sandbox:    sb.Addr().String(),
		Runs:       a.runs,
		Parallel:   a.parallel,
		Cmd:        guestconn.Cmd{Args: a.command, Env: append(cfg.CommandEnv(sb), a.env...), Dir: a.workdir, User: user},
		Timeout:    a.timeout,
		ResultsDir: a.results,
	}
	// Checked before anything is built; the real Start comes after.
	opts.Start = func(context.Context, int, map[string]string, string) (fanout.Sandbox, error) { return nil, nil }
	if err := opts.Check(); err != nil {
		v.usageError("eval", "Invalid options", quoteErr(err))
		return ExitError
	}
	mounts, err := pipeline.EvalMounts(cfg, sb)
	if err != nil {
		v.errorFrom(fmt.Sprintf("Invalid mounts of %s", sb.Addr()), err, true)
		return ExitError
	}
	opts.Mounts = mounts
	if a.stdin {
		data, err := io.ReadAll(io.LimitReader(env.Stdin, maxEvalStdin+1))
		if err != nil {
			v.errorFrom("Cannot read standard input", err, true)
			return ExitError
		}
		if len(data) > maxEvalStdin {
			v.errorDetail("Standard input is too large", fmt.Sprintf("With -i, sbx eval reads at most %d MiB of standard input.", maxEvalStdin>>20))
			return ExitError
		}
		opts.Stdin = data
	}

	img, ok := lockAndBuild(ctx, &quiet, v, cfg, sb.Image, a.lockfile == "readonly")
	if !ok {
		return failedOrInterrupted(ctx, env, "no VM was started")
	}

	var noted sync.Once
	var warned sync.Mutex // runs start at once; their warnings one at a time
	so := pipeline.StartOptions{BootTimeout: a.bootTimeout, Environ: env.Environ, Cold: a.cold}.WithBindings(binds)
	opts.Start = pipeline.EvalStart(cfg, sb, img, so, func(_ int, s *sandbox.Sandbox) fanout.Sandbox {
		if m := s.Machine(); m.Emulated() {
			noted.Do(func() { warnTCG(v, m) })
		}
		warned.Lock()
		warnStart(v, s)
		warned.Unlock()
		return s
	})
	out := &evalOutput{w: env.Stdout}
	opts.OnRun = out.run
	fmt.Fprintf(env.Stderr, "sbx eval: %s of %s, at most %d at once, into %s\n", count(a.runs, "run", "runs"), sb.Addr(), min(a.parallel, a.runs), quoteText(a.results))
	res, err := fanout.Execute(ctx, opts)
	if res == nil {
		if ctx.Err() != nil {
			return interrupted(env, "no run had started")
		}
		v.errorFrom("Eval failed", err, true)
		return ExitError
	}
	runs := res.Runs
	failed := slices.ContainsFunc(runs, func(r fanout.Run) bool { return r.Status == fanout.StatusError })
	out.finish(len(runs), a.runs, a.results)
	switch {
	case ctx.Err() != nil:
		return interrupted(env, fmt.Sprintf("every VM was stopped; %s in the index", count(len(runs), "finished run is", "finished runs are")))
	case err != nil:
		v.errorFrom("Eval failed", err, true)
		return ExitError
	case failed:
		return ExitError
	}
	return ExitOK
}

// runSummary says in one line how a run ended.
// evalOutput prints what sbx eval found on standard output: one line per
// run as it finishes (fanout calls run from one goroutine at a time), then
// how many finished. Each run's line is printed once, when it finishes, so
// that a long eval shows its progress and a terminal does not see it twice.
type evalOutput struct {
	w io.Writer
}

func (o *evalOutput) run(r fanout.Run) {
	fmt.Fprintf(o.w, "run %d: %s\n", r.Run, runSummary(r))
}

func (o *evalOutput) finish(finished, runs int, results string) {
	fmt.Fprintf(o.w, "%d of %d runs finished; results in %s\n", finished, runs, quoteText(results))
}

func runSummary(r fanout.Run) string {
	var s string
	switch r.Status {
	case fanout.StatusExited:
		s = fmt.Sprintf("exit %d", r.ExitCode)
		if r.Signal != "" {
			s += " (" + r.Signal + ")"
		}
	case fanout.StatusTimeout:
		s = "timed out"
	default:
		s = "error: " + r.Error
	}
	d := time.Duration(r.DurationMS) * time.Millisecond
	return fmt.Sprintf("%s in %v, %s", s, d.Round(100*time.Millisecond), count(len(r.Changes), "changed path", "changed paths"))
}

// count writes n with the noun's singular or plural.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
