package command

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/lang"
)

const runUsage = `
Usage: sbx run [options] [DIR] SANDBOX -- COMMAND [ARG...]

  Boot a fresh VM of SANDBOX from the configuration in DIR (default: the
  current directory), run COMMAND in it, and tear the VM down. Output
  streams as the command writes it; sbx exits with the command's exit
  code, or 128 plus the signal's number when a signal killed it, or, as
  shells do, 127 when the guest has no such command and 126 when it
  cannot execute it.

  As "sbx build" would, the lock is brought up to date if it needs to be
  (unless -lockfile=readonly) and the sandbox's image is built, or found
  in the cache. The VM gets the sandbox's CPUs and memory and a private
  copy-on-write layer over the image's disk, discarded at the end. Its
  network is the sandbox's egress policy, enforced on the host, with its
  secrets brokered (their values read from the sources your bindings
  file or the spec gives them: a missing one is an error before anything
  boots, and a secret left without a source before anything is built;
  docs/egress.md), and its
  workspace mounts are served from their host directories under their
  rules (docs/vfs.md), as for a sandbox that "sbx apply" starts. No audit
  log is kept.

  Interrupting sbx (Ctrl-C) or passing the -timeout kills the command's
  process group in the guest, then stops the VM. sbx's own messages go to
  standard error; standard output is the command's alone.

` + bindingsHelp + `
Options:

  -u USER             Run as USER (a name or uid in the image, or uid:gid).
                      Default: the sandbox's user, else root.
  -e KEY=VALUE        Set an environment variable; may be repeated. The
                      image's and the sandbox's env come first.
  -w DIR              Working directory in the guest, an absolute path.
                      Default: the user's home directory.
  -i                  Pass standard input to the command. Without it the
                      command reads nothing (like "docker run" without -i).
  -t                  Run the command on a pseudo-terminal the size of this
                      terminal, resized with it (with -i and a terminal on
                      standard input, typing reaches it, in raw mode).
  -timeout DURATION   Kill the command if it runs longer (e.g. 10m); sbx
                      then exits with 124. Default: no limit.
  -boot-timeout DURATION
                      How long the VM may take to boot (default 2m).
  -cold               Boot the VM rather than resume it from the machine
                      saved for its shape (docs/warm-starts.md).
  -lockfile=readonly  Never update sbx.lock.hcl; fail if it is not up to
                      date.
` + varUsage + `  -no-color           Print without colour.
`

// ExitTimeout is the exit code of "sbx run" when -timeout kills the
// command, as timeout(1) uses.
const ExitTimeout = 124

type runArgs struct {
	guestArgs
	bootTimeout time.Duration
	cold        bool
	lockfile    lockfileMode
	vars        varFlags
	noColor     bool
}

// loadConfig loads the configuration in dir, keeps its sources in v for
// the errors printed later and prints its diagnostics; ok is false when
// one of them is an error.
func loadConfig(v *view, dir string, opts lang.Options) (cfg *lang.Config, ok bool) {
	cfg, diags := lang.Load(dir, opts)
	v.files = sources(cfg)
	v.diagnostics(sources(cfg), diags)
	return cfg, !diags.HasErrors()
}

// warnStart says so when a warm start was to be made and the sandbox
// booted instead.
func warnStart(v *view, s *sandbox.Sandbox) {
	if w := s.Started().Warning; w != "" {
		v.warning("Booted instead of a warm start", w+".")
	}
}

// warnTCG warns that m runs under TCG, with the host's reason, when it
// does.
func warnTCG(v *view, m *machine.Machine) {
	if !m.Emulated() {
		return
	}
	note := m.Host().Note
	if note == "" {
		note = "no hardware virtualization for this guest; using TCG"
	}
	v.warning("Using TCG: commands run slower", note+".")
}

// loadSandbox loads the configuration in dir and finds the sandbox that
// name names ("sandbox." may lead), printing the diagnostics and, when
// there is no such sandbox, the ones there are.
func loadSandbox(v *view, dir string, opts lang.Options, name string) (*lang.Config, *lang.Sandbox, bool) {
	cfg, ok := loadConfig(v, dir, opts)
	if !ok {
		return nil, nil, false
	}
	sb, ok := cfg.Sandboxes[strings.TrimPrefix(name, "sandbox.")]
	if !ok {
		names := slices.Sorted(maps.Keys(cfg.Sandboxes))
		v.errorDetail(fmt.Sprintf("No sandbox %q in the configuration", name), "The sandboxes are: "+strings.Join(names, ", "))
		return nil, nil, false
	}
	return cfg, sb, true
}

func runRun(ctx context.Context, env *Env, args []string) int {
	var a runArgs
	flags := newFlagSet("run")
	a.register(flags)
	flags.DurationVar(&a.bootTimeout, "boot-timeout", machine.DefaultBootTimeout, "")
	flags.BoolVar(&a.cold, "cold", false, "")
	flags.Var(&a.lockfile, "lockfile", "")
	a.vars.register(flags)
	flags.BoolVar(&a.noColor, "no-color", false, "")
	if code, ok := a.parse(env, "run", runUsage, flags, args); !ok {
		return code
	}

	// Everything sbx says goes to stderr: stdout is the command's.
	quiet := *env
	quiet.Stdout = env.Stderr
	v := newView(&quiet, a.noColor)

	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	cfg, sb, ok := loadSandbox(v, a.dir, a.vars.options(env), a.sandbox)
	if !ok || !a.checkEnv(v, "run", sb.Policy) {
		return ExitError
	}
	binds, ok := checkSecrets(v, env, cfg, sb)
	if !ok {
		return ExitError
	}
	img, ok := lockAndBuild(ctx, &quiet, v, cfg, sb.Image, a.lockfile == "readonly")
	if !ok {
		return failedOrInterrupted(ctx, env, "no VM was started")
	}

	s, err := pipeline.Start(ctx, cfg, sb, img, pipeline.StartOptions{BootTimeout: a.bootTimeout, Environ: env.Environ, Cold: a.cold}.WithBindings(binds))
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(env, fmt.Sprintf("%s was stopped while it was booting", sb.Addr()))
		}
		v.errorDetail(fmt.Sprintf("Cannot start %s", sb.Addr()), quoteErr(err))
		return ExitError
	}
	// The VM is stopped whatever happens, also after an interrupt: Stop
	// must not inherit the cancelled context.
	m := s.Machine()
	defer func() {
		if err := s.Stop(context.WithoutCancel(ctx)); err != nil {
			v.errorFrom(fmt.Sprintf("Cannot stop %s", sb.Addr()), err, true)
		}
	}()
	warnTCG(v, m)
	warnStart(v, s)
	return a.exec(ctx, env, m, cfg, sb)
}

// exec runs the command in the machine and returns sbx's exit code.
func (a *runArgs) exec(ctx context.Context, env *Env, m *machine.Machine, cfg *lang.Config, sb *lang.Sandbox) int {
	user := a.user
	if user == "" {
		user = sb.User
	}
	vars := append(cfg.CommandEnv(sb), a.env...)
	g := guestCommand{verb: "run", target: sb.Addr().String(), stdin: a.stdin, tty: a.tty, timeout: a.timeout}
	return g.run(ctx, env, guestconn.Cmd{Args: a.command, Env: vars, Dir: a.workdir, User: user}, m.Exec)
}

// lockAndBuild brings the lock up to date as run and eval need it
// (lockForPlan) and builds image name with it (buildImage). Errors are
// printed as those two print them.
func lockAndBuild(ctx context.Context, env *Env, v *view, cfg *lang.Config, name string, readonly bool) (*image.Result, bool) {
	lock, ok := lockForPlan(ctx, env, v, cfg, readonly)
	if !ok {
		return nil, false
	}
	return buildImage(ctx, env, v, cfg, lock, name, readonly)
}

// buildImage builds one image of cfg as "sbx build" does, with the
// progress on stderr, and records its output hashes in the lock file.
// Errors are printed, except an interrupt's (ctx ended), which the caller
// reports.
func buildImage(ctx context.Context, env *Env, v *view, cfg *lang.Config, lock *lockfiles.Lock, name string, readonly bool) (*image.Result, bool) {
	r, err := buildOne(ctx, env, v, cfg, lock, name, readonly)
	if err != nil {
		if ctx.Err() == nil {
			v.errorFrom(fmt.Sprintf("Cannot build %s", addrs.ImageRef(name)), err, false)
		}
		return nil, false
	}
	return r, true
}

// buildOne is buildImage returning its error instead of printing it
// (recording the outputs prints its own).
func buildOne(ctx context.Context, env *Env, v *view, cfg *lang.Config, lock *lockfiles.Lock, name string, readonly bool) (*image.Result, error) {
	opts, ok := buildOptions(env, v, cfg)
	if !ok {
		return nil, errors.New("cannot set up the build")
	}
	p := newBuildProgress(env.Stderr, addrs.ImageRef(name).String())
	opts.Stage = p.stage
	opts.ProvisionStep = p.step
	opts.Fetch.Progress = p.bytes
	r, err := pipeline.Build(ctx, cfg, lock, name, opts)
	p.done()
	if err != nil {
		return nil, err
	}
	if !recordOutputs(ctx, env, v, cfg, lock, map[string]*image.Result{name: r}, readonly) {
		return nil, errors.New("cannot record its outputs in " + lockfiles.FileName)
	}
	return r, nil
}
