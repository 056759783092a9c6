package fanout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/policy"
	"github.com/sbx-dev/sbx/policy/match"
)

// Environment variables each run's command gets.
const (
	// EnvRun is the run's index, 0 to N-1.
	EnvRun = "SBX_RUN"
	// EnvRuns is N, the number of runs.
	EnvRuns = "SBX_RUNS"
)

// DefaultMaxOutput is how much of each of a run's output streams is
// kept when Options.MaxOutput is zero.
const DefaultMaxOutput = 64 << 20

// Sandbox is a started sandbox as Execute uses it.
type Sandbox interface {
	// Exec runs a command and waits for it; when ctx ends first the
	// command is killed and ctx's error returned.
	Exec(ctx context.Context, cmd guestconn.Cmd) (*guestconn.ExitStatus, error)
	// Stop stops the sandbox and waits until its VM is gone.
	Stop(ctx context.Context) error
}

// StartFunc starts the sandbox of run number run, its workspace mounts
// served from mountDirs (guest path → host directory) instead of their
// own host directories, its egress audit log (if any) written in
// auditDir. When ctx ends first it must return ctx's error with nothing
// left running.
type StartFunc func(ctx context.Context, run int, mountDirs map[string]string, auditDir string) (Sandbox, error)

// Mount is a workspace mount of the sandbox.
type Mount struct {
	// Policy is the mount as the sandbox's policy has it: its guest path,
	// access and rules.
	Policy policy.Mount
	// HostDir is its host directory, absolute.
	HostDir string
}

// Options configure Execute.
type Options struct {
	// Sandbox names the sandbox, for EvalFile.
	Sandbox string
	// Runs is how many runs there are, N; Parallel how many run at
	// once at most, P. Both must be at least 1.
	Runs     int
	Parallel int
	// Mounts are the sandbox's workspace mounts; each read-write one is
	// copied for each run, the others are served as they are.
	Mounts []Mount
	// Cmd is the command: its Args, Env, Dir and User. Its streams are
	// ignored; EnvRun and EnvRuns are added to its Env.
	Cmd guestconn.Cmd
	// Stdin is every run's standard input.
	Stdin []byte
	// Timeout, if set, kills a run's command that runs longer.
	Timeout time.Duration
	// MaxOutput bounds what is kept of each output stream of each run;
	// zero means DefaultMaxOutput.
	MaxOutput int64
	// ResultsDir is the results directory; it must not exist or be
	// empty (MakeResultsDir).
	ResultsDir string
	// Start starts one run's sandbox.
	Start StartFunc
	// OnRun, if set, is called with each run once its index line is
	// written, from the run's goroutine.
	OnRun func(Run)
}

// Result is what Execute did.
type Result struct {
	// Runs are the finished runs, in the order they finished, as the
	// index has them.
	Runs []Run
	// Mounts are the read-write mounts and how they were copied.
	Mounts []EvalMount
}

// Check reports what is wrong with opts before anything is made, the
// results directory included.
func (o *Options) Check() error {
	var errs []error
	if o.Runs < 1 {
		errs = append(errs, fmt.Errorf("the number of runs must be at least 1, not %d", o.Runs))
	}
	if o.Parallel < 1 {
		errs = append(errs, fmt.Errorf("the number of runs at once must be at least 1, not %d", o.Parallel))
	}
	if len(o.Cmd.Args) == 0 {
		errs = append(errs, errors.New("no command to run"))
	} else if err := o.Cmd.Check(); err != nil {
		errs = append(errs, err)
	}
	if o.ResultsDir == "" {
		errs = append(errs, errors.New("no results directory"))
	} else if _, err := CheckResultsDir(o.ResultsDir); err != nil {
		errs = append(errs, err)
	}
	if o.Start == nil {
		errs = append(errs, errors.New("no way to start a sandbox (Options.Start)"))
	}
	if o.MaxOutput < 0 {
		errs = append(errs, fmt.Errorf("MaxOutput is negative: %d", o.MaxOutput))
	}
	return errors.Join(errs...)
}

// copied is one read-write mount with its snapshot.
type copied struct {
	guest string
	base  string
	rules *match.MountRules
}

// Execute runs the eval: it makes the results directory, snapshots the
// read-write mounts, then runs opts.Runs runs, at most opts.Parallel at
// once, in index order, and returns the finished ones. A run that fails
// (its sandbox does not start, its command cannot run) is finished, with
// StatusError. When ctx ends, no new run starts, the running ones are
// killed and their sandboxes stopped, and Execute returns, once every
// sandbox is gone, the runs that had finished and ctx's error; the
// others leave nothing in the results directory. The work directory is
// removed in every case.
func Execute(ctx context.Context, opts Options) (*Result, error) {
	if err := opts.Check(); err != nil {
		return nil, err
	}
	if opts.MaxOutput == 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	results, err := filepath.Abs(opts.ResultsDir)
	if err != nil {
		return nil, err
	}
	existed, err := CheckResultsDir(results)
	if err != nil {
		return nil, err
	}
	if err := MakeResultsDir(results); err != nil {
		return nil, err
	}
	// Until the first run starts, a failure leaves the results
	// directory as it was: absent, or empty.
	started := false
	defer func() {
		if started {
			return
		}
		if !existed {
			RemoveTree(results)
			return
		}
		ents, _ := os.ReadDir(results)
		for _, e := range ents {
			RemoveTree(filepath.Join(results, e.Name()))
		}
	}()
	work := filepath.Join(results, WorkDir)
	if err := os.Mkdir(work, 0o700); err != nil {
		return nil, err
	}
	defer RemoveTree(work)
	if err := os.Mkdir(filepath.Join(results, RunsDir), 0o700); err != nil {
		return nil, err
	}

	res := &Result{}
	var mounts []copied
	for k, m := range opts.Mounts {
		if m.Policy.Access != policy.ReadWrite {
			continue
		}
		rules, err := match.CompileMountRules(m.Policy.Hide, m.Policy.ReadOnly, m.Policy.Tmpfs)
		if err != nil {
			return nil, fmt.Errorf("mount %s: %w", m.Policy.Guest, err)
		}
		base := filepath.Join(work, "base", strconv.Itoa(k))
		if err := os.MkdirAll(filepath.Dir(base), 0o700); err != nil {
			return nil, err
		}
		st, err := CopyTree(ctx, m.HostDir, base, rules, []string{results})
		if err != nil {
			return nil, fmt.Errorf("copying mount %s (%s): %w", m.Policy.Guest, m.HostDir, err)
		}
		mounts = append(mounts, copied{guest: m.Policy.Guest, base: base, rules: rules})
		res.Mounts = append(res.Mounts, EvalMount{Guest: m.Policy.Guest, HostDir: m.HostDir, Copy: st})
	}
	if err := writeJSON(filepath.Join(results, EvalFile), Eval{
		Sandbox: opts.Sandbox, Runs: opts.Runs, Parallel: opts.Parallel,
		Command: opts.Cmd.Args, Started: time.Now().UTC(), Mounts: res.Mounts,
	}); err != nil {
		return nil, err
	}
	index, err := CreateIndex(results)
	if err != nil {
		return nil, err
	}
	defer index.Close()

	if err := ctx.Err(); err != nil {
		return nil, err
	}
	started = true
	e := &evaluator{opts: opts, results: results, work: work, mounts: mounts, index: index}
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		sem = make(chan struct{}, opts.Parallel)
	)
dispatch:
	for i := range opts.Runs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break dispatch
		}
		if ctx.Err() != nil {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r, ok, err := e.run(ctx, i)
			if !ok {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				e.errs = append(e.errs, err)
				return
			}
			res.Runs = append(res.Runs, r)
			if opts.OnRun != nil {
				opts.OnRun(r)
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, errors.Join(e.errs...)
}

type evaluator struct {
	opts    Options
	results string
	work    string
	mounts  []copied
	index   *Index
	errs    []error
}

// run runs run number i. ok is false when an interrupt cut it short
// (nothing is kept of it); err is set when its results could not be
// written (the run is then not in the index).
func (e *evaluator) run(ctx context.Context, i int) (r Run, ok bool, err error) {
	start := time.Now()
	r = Run{Run: i, Started: start.UTC(), ExitCode: -1, Changes: []Change{}}
	name := strconv.Itoa(i)
	runRel := filepath.Join(RunsDir, name)
	runDir := filepath.Join(e.results, runRel)
	work := filepath.Join(e.work, name)
	defer RemoveTree(work)
	if err := os.Mkdir(runDir, 0o700); err != nil {
		return r, true, err
	}
	discard := func() { RemoveTree(runDir) }
	finish := func() (Run, bool, error) {
		r.DurationMS = time.Since(start).Milliseconds()
		if err := e.index.Append(r); err != nil {
			return r, true, fmt.Errorf("run %d: writing the index: %w", i, err)
		}
		return r, true, nil
	}

	r.Stdout, r.Stderr = filepath.Join(runRel, StdoutFile), filepath.Join(runRel, StderrFile)
	stdout, err := newCapped(filepath.Join(e.results, r.Stdout), e.opts.MaxOutput)
	if err != nil {
		return r, true, err
	}
	defer stdout.Close()
	stderr, err := newCapped(filepath.Join(e.results, r.Stderr), e.opts.MaxOutput)
	if err != nil {
		return r, true, err
	}
	defer stderr.Close()

	if err := os.Mkdir(work, 0o700); err != nil {
		return r, true, err
	}
	dirs := map[string]string{}
	var trees []mountTrees
	for k, m := range e.mounts {
		d := filepath.Join(work, strconv.Itoa(k))
		if _, err := CopyTree(ctx, m.base, d, m.rules, nil); err != nil {
			if ctx.Err() != nil {
				discard()
				return r, false, nil
			}
			r.Status, r.Error = StatusError, fmt.Sprintf("copying mount %s: %v", m.guest, err)
			return finish()
		}
		dirs[m.guest] = d
		trees = append(trees, mountTrees{base: m.base, run: d})
	}
	if ctx.Err() != nil {
		discard()
		return r, false, nil
	}

	bootStart := time.Now()
	sb, err := e.opts.Start(ctx, i, dirs, runDir)
	r.BootMS = time.Since(bootStart).Milliseconds()
	if err != nil {
		if ctx.Err() != nil {
			discard()
			return r, false, nil
		}
		r.Status, r.Error = StatusError, "starting the sandbox: "+err.Error()
		return finish()
	}
	cmd := e.opts.Cmd
	cmd.Env = append(slices.Clone(cmd.Env), EnvRun+"="+name, EnvRuns+"="+strconv.Itoa(e.opts.Runs))
	cmd.Stdin = bytes.NewReader(e.opts.Stdin)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.PTY = nil
	execCtx, cancel := ctx, context.CancelFunc(func() {})
	if e.opts.Timeout > 0 {
		execCtx, cancel = context.WithTimeout(ctx, e.opts.Timeout)
	}
	cmdStart := time.Now()
	st, execErr := sb.Exec(execCtx, cmd)
	r.CommandMS = time.Since(cmdStart).Milliseconds()
	cancel()
	// The VM goes whatever happened, also after an interrupt.
	stopErr := sb.Stop(context.WithoutCancel(ctx))

	var notRun *guestconn.CommandError
	switch {
	case execErr == nil:
		r.Status, r.ExitCode, r.Signal = StatusExited, st.ShellCode(), st.Signal
	case ctx.Err() != nil:
		discard()
		return r, false, nil
	case errors.As(execErr, &notRun):
		r.Status, r.ExitCode, r.Error = StatusExited, notRun.Code, execErr.Error()
	case errors.Is(execErr, context.DeadlineExceeded) && e.opts.Timeout > 0:
		r.Status, r.Error = StatusTimeout, fmt.Sprintf("the command did not finish within %v; it was killed", e.opts.Timeout)
	default:
		r.Status, r.Error = StatusError, execErr.Error()
	}
	if stopErr != nil {
		r.Error = joinMsg(r.Error, stopErr.Error())
	}
	r.StdoutBytes, r.StdoutTruncated = stdout.n, stdout.cut
	r.StderrBytes, r.StderrTruncated = stderr.n, stderr.cut
	if err := errors.Join(stdout.Close(), stderr.Close()); err != nil {
		return r, true, fmt.Errorf("run %d: %w", i, err)
	}
	if info, err := os.Stat(filepath.Join(runDir, audit.File)); err == nil && info.Size() > 0 {
		r.Audit = filepath.Join(runRel, audit.File)
	}

	for k, m := range e.mounts {
		ch, err := Compare(m.base, trees[k].run, m.guest, m.rules)
		if err != nil {
			r.Error = joinMsg(r.Error, fmt.Sprintf("collecting the changes in %s: %v", m.guest, err))
			continue
		}
		trees[k].changes = ch
		r.Changes = append(r.Changes, ch...)
	}
	if len(r.Changes) > 0 {
		r.ChangesTar, r.ChangesDiff = filepath.Join(runRel, ChangesTar), filepath.Join(runRel, ChangesDiff)
		if err := writeFile(filepath.Join(e.results, r.ChangesTar), func(f *os.File) error { return writeTar(f, trees) }); err != nil {
			return r, true, fmt.Errorf("run %d: %w", i, err)
		}
		if err := writeFile(filepath.Join(e.results, r.ChangesDiff), func(f *os.File) error { return writeDiff(f, trees) }); err != nil {
			return r, true, fmt.Errorf("run %d: %w", i, err)
		}
	}
	return finish()
}

func joinMsg(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// writeFile creates p (private, new) and fills it with write, synced.
func writeFile(p string, write func(*os.File) error) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// capped is an output file that keeps the first max bytes written to it
// and counts the rest away; writes never fail for being over, so the
// command is not disturbed.
type capped struct {
	f      *os.File
	max, n int64
	cut    bool
	err    error
	closed bool
}

func newCapped(p string, max int64) (*capped, error) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	return &capped{f: f, max: max}, nil
}

func (c *capped) Write(p []byte) (int, error) {
	keep := p
	if room := c.max - c.n; int64(len(keep)) > room {
		keep = keep[:max(room, 0)]
		c.cut = true
	}
	if len(keep) > 0 && c.err == nil {
		if _, err := c.f.Write(keep); err != nil {
			c.err = err
		}
	}
	c.n += int64(len(keep))
	return len(p), nil
}

func (c *capped) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	err := c.f.Sync()
	return errors.Join(c.err, err, c.f.Close())
}
