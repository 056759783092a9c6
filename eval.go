package sbx

import (
	"context"
	"time"

	"github.com/sbx-dev/sbx/internal/fanout"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxnet"
)

// EvalRun is what one finished run of an eval did: its status, exit
// code, durations, output files and the changes it made to its
// workspace copy. It is one line of the results directory's index
// (docs/eval.md), whose JSON it reads and writes.
type EvalRun struct {
	// Run is the run's index, 0 to Runs-1, also its EvalRunEnv.
	Run int `json:"run"`
	// Status is "exited" (the command ran to its end, whatever its exit
	// code), "timeout" or "error".
	Status string `json:"status"`
	// ExitCode is the command's exit code: 128 plus the signal's number
	// when a signal killed it, 126 or 127 when the guest could not
	// execute or find it, -1 when it did not run.
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	Error    string `json:"error,omitempty"`
	// Started is when the run began (its workspace copy); the durations
	// are its whole run, the sandbox's start and the command's run.
	Started    time.Time `json:"started"`
	DurationMS int64     `json:"duration_ms"`
	BootMS     int64     `json:"boot_ms"`
	CommandMS  int64     `json:"command_ms"`
	// Stdout and Stderr are the files holding the command's output,
	// relative to the results directory, with their sizes; a stream cut
	// at EvalOptions.MaxOutput says so.
	Stdout          string `json:"stdout"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	Stderr          string `json:"stderr"`
	StderrBytes     int64  `json:"stderr_bytes"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	// Changes are the paths the run changed in its read-write workspace
	// mounts, sorted; ChangesTar and ChangesDiff the files holding them
	// (relative to the results directory), set when there are changes.
	Changes     []EvalChange `json:"changes"`
	ChangesTar  string       `json:"changes_tar,omitempty"`
	ChangesDiff string       `json:"changes_diff,omitempty"`
	// Audit is the sandbox's egress audit log, when it wrote one.
	Audit string `json:"audit,omitempty"`
}

// EvalChange is one path a run added, modified or deleted in a
// read-write workspace mount.
type EvalChange struct {
	// Path is the path in the guest: the mount's guest path joined with
	// the path inside the mount.
	Path string `json:"path"`
	// Change is "added", "modified" or "deleted".
	Change string `json:"change"`
	// Type is what the path is now (what it was, when deleted): "file",
	// "dir", "symlink" or "other".
	Type string `json:"type"`
}

// EvalResult is what Eval did: the finished runs, in the order they
// finished, and how each read-write mount was copied.
type EvalResult struct {
	Runs   []EvalRun
	Mounts []EvalMount
}

// EvalMount is a read-write workspace mount of an eval and how its host
// directory was copied into the snapshot the runs' copies are made from.
type EvalMount struct {
	Guest   string        `json:"guest"`
	HostDir string        `json:"host_dir"`
	Copy    EvalCopyStats `json:"copy"`
}

// EvalCopyStats count what a copy of a mount's host directory held.
type EvalCopyStats struct {
	Files    int   `json:"files"`
	Dirs     int   `json:"dirs"`
	Symlinks int   `json:"symlinks"`
	Bytes    int64 `json:"bytes"`
	// Cloned is how many of the files were reflinked rather than copied
	// byte by byte.
	Cloned int `json:"cloned"`
	// Skipped counts what was left out: hidden and tmpfs paths, the
	// excluded directories and what is neither a directory, a regular
	// file nor a symbolic link (sockets, pipes, devices).
	Skipped int `json:"skipped"`
}

func evalRun(r fanout.Run) EvalRun {
	out := EvalRun{
		Run: r.Run, Status: r.Status, ExitCode: r.ExitCode, Signal: r.Signal, Error: r.Error,
		Started: r.Started, DurationMS: r.DurationMS, BootMS: r.BootMS, CommandMS: r.CommandMS,
		Stdout: r.Stdout, StdoutBytes: r.StdoutBytes, StdoutTruncated: r.StdoutTruncated,
		Stderr: r.Stderr, StderrBytes: r.StderrBytes, StderrTruncated: r.StderrTruncated,
		ChangesTar: r.ChangesTar, ChangesDiff: r.ChangesDiff, Audit: r.Audit,
	}
	if r.Changes != nil {
		out.Changes = make([]EvalChange, len(r.Changes))
		for i, c := range r.Changes {
			out.Changes[i] = EvalChange{Path: c.Path, Change: c.Change, Type: c.Type}
		}
	}
	return out
}

func evalResult(r *fanout.Result) *EvalResult {
	if r == nil {
		return nil
	}
	out := &EvalResult{}
	for _, run := range r.Runs {
		out.Runs = append(out.Runs, evalRun(run))
	}
	for _, m := range r.Mounts {
		out.Mounts = append(out.Mounts, EvalMount{Guest: m.Guest, HostDir: m.HostDir, Copy: EvalCopyStats(m.Copy)})
	}
	return out
}

// evalSandbox is a sandbox as the fan-out runs commands in it.
type evalSandbox struct{ *Sandbox }

func (s evalSandbox) Exec(ctx context.Context, c guestconn.Cmd) (*guestconn.ExitStatus, error) {
	return s.exec(ctx, c)
}

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
		Cmd:        opts.Cmd.internal(),
		Stdin:      opts.Stdin,
		Timeout:    opts.Timeout,
		MaxOutput:  opts.MaxOutput,
		ResultsDir: opts.ResultsDir,
	}
	if opts.OnRun != nil {
		fo.OnRun = func(r fanout.Run) { opts.OnRun(evalRun(r)) }
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
	binds, err := cfg.checkSecrets(sb)
	if err != nil {
		return nil, err
	}
	if fo.Mounts, err = pipeline.EvalMounts(cfg.Lang, sb); err != nil {
		return nil, err
	}
	img, err := cfg.build(ctx, sb.Image)
	if err != nil {
		return nil, err
	}
	env := cfg.Lang.CommandEnv(sb)
	so := opts.Start.internal().WithBindings(binds)
	fo.Start = pipeline.EvalStart(cfg.Lang, sb, img, so, func(_ int, s *sandbox.Sandbox) fanout.Sandbox {
		return evalSandbox{&Sandbox{Name: sb.Name, spec: sb, env: env, m: s.Machine(), sb: s, binds: binds}}
	})
	res, err := fanout.Execute(ctx, fo)
	return evalResult(res), err
}
