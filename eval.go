package sbx

import (
	"context"
	"time"

	"github.com/sbx-dev/sbx/internal/fanout"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxnet"
)

// EvalRun is what one finished run of an eval did: its status, exit
// code, durations, output files and the changes it made to its
// workspace copy. It is one line of the results directory's index
// (docs/eval.md).
type EvalRun = fanout.Run

// EvalChange is one path a run added, modified or deleted in a
// read-write workspace mount.
type EvalChange = fanout.Change

// EvalResult is what Eval did: the finished runs, in the order they
// finished, and how each read-write mount was copied.
type EvalResult = fanout.Result

// Environment variables each eval run's command gets.
const (
	// EvalRunEnv holds the run's index, 0 to Runs-1.
	EvalRunEnv = fanout.EnvRun
	// EvalRunsEnv holds the number of runs.
	EvalRunsEnv = fanout.EnvRuns
)

// EvalOptions configure Eval.
type EvalOptions struct {
	// Runs is how many fresh sandboxes run the command, and Parallel
	// how many run at once at most. Both must be at least 1.
	Runs     int
	Parallel int
	// Cmd is the command: its Args, Env, Dir and User (empty: the
	// sandbox's). Its streams are ignored: each run's output goes to
	// files in the results directory. EvalRunEnv and EvalRunsEnv are
	// added to its environment.
	Cmd Cmd
	// Stdin is every run's standard input.
	Stdin []byte
	// Timeout, if set, kills a run's command that runs longer; the run
	// is recorded with status "timeout".
	Timeout time.Duration
	// MaxOutput bounds what is kept of each run's stdout and stderr;
	// zero means 64 MiB each.
	MaxOutput int64
	// ResultsDir is where the results go. It must not exist, or be an
	// empty directory; it is made private (0700). Put it on the same
	// file system as the workspace for reflinked copies.
	ResultsDir string
	// Start configures each run's sandbox. Its AuditDir and MountDirs
	// are set per run: each run's egress audit log goes to its own
	// directory in the results, and its read-write mounts are served
	// from its own copy.
	Start StartOptions
	// OnRun, if set, is called with each run once its line is in the
	// index, from the run's goroutine.
	OnRun func(EvalRun)
}

// Eval runs one command across opts.Runs fresh sandboxes of the sandbox
// named name, at most opts.Parallel at once, each with its own
// copy-on-write copy of every read-write workspace mount's host
// directory, and keeps each run's exit code, output, durations and
// changes in opts.ResultsDir with a JSON-lines index, one line per
// finished run, synced as it finishes (docs/eval.md).
//
// The image is built first (see Config.Build). Every read-write mount's
// host directory is read once, into a private snapshot that leaves out
// the mount's hidden and tmpfs paths; each run's copy is made from the
// snapshot, and its changes are the differences between the two. The
// host's own tree is never written.
//
// A run whose sandbox does not start, or whose command cannot run, is
// finished with status "error"; Eval still returns no error for it. When
// ctx ends, no new run starts, the running commands are killed and their
// sandboxes stopped, and Eval returns, once every VM is gone, the runs
// that had finished together with ctx's error; runs cut short leave
// nothing in the results directory.
func Eval(ctx context.Context, cfg *Config, name string, opts EvalOptions) (*EvalResult, error) {
	sb, err := pipeline.Sandbox(cfg.Lang, name)
	if err != nil {
		return nil, err
	}
	fo := fanout.Options{
		Sandbox:    sb.Addr().String(),
		Runs:       opts.Runs,
		Parallel:   opts.Parallel,
		Cmd:        opts.Cmd,
		Stdin:      opts.Stdin,
		Timeout:    opts.Timeout,
		MaxOutput:  opts.MaxOutput,
		ResultsDir: opts.ResultsDir,
		OnRun:      opts.OnRun,
	}
	// A placeholder until the image is built, so that bad options fail
	// before the build.
	fo.Start = func(context.Context, int, map[string]string, string) (fanout.Sandbox, error) { return nil, nil }
	if err := fo.Check(); err != nil {
		return nil, err
	}
	if err := sandboxnet.CheckEnv(sb.Policy, opts.Cmd.Env); err != nil {
		return nil, err
	}
	if fo.Mounts, err = pipeline.EvalMounts(cfg.Lang, sb); err != nil {
		return nil, err
	}
	img, err := cfg.Build(ctx, sb.Image)
	if err != nil {
		return nil, err
	}
	env := cfg.Lang.CommandEnv(sb)
	fo.Start = pipeline.EvalStart(cfg.Lang, sb, img, opts.Start, func(_ int, s *sandbox.Sandbox) fanout.Sandbox {
		return &Sandbox{Name: sb.Name, spec: sb, env: env, m: s.Machine(), sb: s}
	})
	return fanout.Execute(ctx, fo)
}
