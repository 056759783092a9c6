package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
)

// Bounds of every wait.
const (
	setupTimeout = 15 * time.Minute // the fixture and the image
	evalTimeout  = 20 * time.Minute // one eval, 8 runs included
	fileSize     = 16 << 10
)

// script is each run's command: it reads every file, writes one and
// edits one.
const script = `set -e
cd /workspace
sha256sum src/* > "sums-$SBX_RUN"
echo "edited by $SBX_RUN" >> README.md
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("evalbench", flag.ContinueOnError)
	flags.SetOutput(stderr)
	rounds := flags.Int("rounds", 1, "rounds of measurements after the warm-up")
	parallel := flags.Int("p", 4, "runs at once in each eval")
	ns := flags.String("n", "1,4,8", "numbers of runs, comma-separated")
	files := flags.Int("files", 200, "files of 16 KiB in the workspace")
	spec := flags.String("spec", "internal/e2etest/testdata/eval/sbx.hcl", "the spec (run from the repository root)")
	work := flags.String("work", "", "work directory, kept afterwards (default: a temporary directory, removed)")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	counts, err := parseCounts(*ns)
	if err != nil || *rounds < 1 || *parallel < 1 || *files < 1 || flags.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: go run ./bench/evalbench [-rounds 1] [-p 4] [-n 1,4,8] [-files 200] [-work DIR]")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	b := &bench{log: stderr, rounds: *rounds, parallel: *parallel, counts: counts, files: *files}
	res, err := b.run(ctx, *spec, *work)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("interrupted: %w", err)
	}
	left := b.cleanup()
	if res != nil {
		res.print(stdout)
	}
	code := 0
	if err != nil {
		fmt.Fprintf(stderr, "evalbench: %v\n", err)
		code = 1
	}
	if left != nil {
		fmt.Fprintf(stderr, "evalbench: %v\n", left)
		code = 1
	}
	return code
}

// parseCounts parses "1,4,8".
func parseCounts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad number of runs %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

type bench struct {
	log                     io.Writer
	rounds, parallel, files int
	counts                  []int
	work, vmDir, resultsDir string
	tempWork                bool
	cfg                     *sbx.Config
	environ                 []string
	evals                   int
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "%s evalbench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// sample is one eval: its wall time and its runs.
type sample struct {
	n    int
	wall time.Duration
	runs []sbx.EvalRun
}

// results are every sample of the session.
type results struct {
	parallel, files, hostCPUs int
	copy                      string
	counts                    []int
	single                    []sample // lone runs (N=1, P=1)
	evals                     map[int][]sample
}

func (b *bench) run(ctx context.Context, spec, work string) (*results, error) {
	if err := b.setup(ctx, spec, work); err != nil {
		return nil, err
	}
	res := &results{parallel: b.parallel, files: b.files, hostCPUs: runtime.NumCPU(), counts: b.counts, evals: map[int][]sample{}}
	b.logf("warm-up: one run")
	warm, err := b.eval(ctx, 1, 1)
	if err != nil {
		return res, err
	}
	if len(warm.runs) == 1 {
		res.copy = b.copyNote()
	}
	for r := range b.rounds {
		b.logf("round %d of %d", r+1, b.rounds)
		s, err := b.eval(ctx, 1, 1)
		if err != nil {
			return res, err
		}
		res.single = append(res.single, s)
		for _, n := range b.counts {
			s, err := b.eval(ctx, n, b.parallel)
			if err != nil {
				return res, err
			}
			res.evals[n] = append(res.evals[n], s)
		}
		if s, err = b.eval(ctx, 1, 1); err != nil {
			return res, err
		}
		res.single = append(res.single, s)
	}
	return res, nil
}

// setup makes the fixture, the configuration and its workspace, and
// builds the image.
func (b *bench) setup(ctx context.Context, spec, work string) error {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	if work == "" {
		dir, err := os.MkdirTemp("", "evalbench-")
		if err != nil {
			return err
		}
		work, b.tempWork = dir, true
	}
	abs, err := filepath.Abs(work)
	if err != nil {
		return err
	}
	b.work = abs
	// VM directories hold sockets: a short path of their own, also how
	// the QEMU processes of this program are found at the end.
	if b.vmDir, err = os.MkdirTemp("", "evb-"); err != nil {
		return err
	}
	b.logf("making the fixture in %s", b.work)
	fix, err := machinetest.New(ctx, b.work)
	if err != nil {
		return err
	}
	b.environ = fix.Environ
	cfgDir := filepath.Join(b.work, "evalcfg")
	ws := filepath.Join(cfgDir, "work")
	os.RemoveAll(cfgDir)
	if err := os.MkdirAll(filepath.Join(ws, "src"), 0o755); err != nil {
		return err
	}
	for _, name := range []string{"kernel.deb", "busybox.deb"} {
		data, err := os.ReadFile(filepath.Join(fix.Dir, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(cfgDir, name), data, 0o644); err != nil {
			return err
		}
	}
	data, err := os.ReadFile(spec)
	if err != nil {
		return fmt.Errorf("%w (run from the repository root, or pass -spec)", err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "sbx.hcl"), data, 0o644); err != nil {
		return err
	}
	line := bytes.Repeat([]byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n"), fileSize/64)
	for i := range b.files {
		if err := os.WriteFile(filepath.Join(ws, "src", fmt.Sprintf("f%04d.txt", i)), line, 0o644); err != nil {
			return err
		}
	}
	for name, content := range map[string]string{"README.md": "bench\n", ".env": "TOKEN=never-copied\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	if b.cfg, err = sbx.Load(cfgDir, sbx.Options{Environ: b.environ}); err != nil {
		return err
	}
	b.resultsDir = filepath.Join(b.work, "results")
	os.RemoveAll(b.resultsDir)
	start := time.Now()
	if _, err := b.cfg.Build(ctx, "box"); err != nil {
		return err
	}
	b.logf("image built in %v", time.Since(start).Round(time.Second))
	return nil
}

// eval runs one eval of n runs, p at once, and checks every run.
func (b *bench) eval(ctx context.Context, n, p int) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, evalTimeout)
	defer cancel()
	b.evals++
	dir := filepath.Join(b.resultsDir, strconv.Itoa(b.evals))
	start := time.Now()
	res, err := sbx.Eval(ctx, b.cfg, "evalbox", sbx.EvalOptions{
		Runs:       n,
		Parallel:   p,
		Cmd:        sbx.Cmd{Args: []string{"sh", "-c", script}},
		ResultsDir: dir,
		Start:      sbx.StartOptions{Environ: b.environ, Dir: b.vmDir},
	})
	s := sample{n: n, wall: time.Since(start)}
	if err != nil {
		return s, fmt.Errorf("eval of %d runs: %w", n, err)
	}
	s.runs = res.Runs
	if len(res.Runs) != n {
		return s, fmt.Errorf("eval of %d runs: %d finished", n, len(res.Runs))
	}
	for _, r := range res.Runs {
		if r.Status != "exited" || r.ExitCode != 0 || len(r.Changes) != 2 {
			return s, fmt.Errorf("eval of %d runs: run %d: %s, exit %d, %d changes: %s", n, r.Run, r.Status, r.ExitCode, len(r.Changes), r.Error)
		}
	}
	b.logf("%d runs, %d at once: %v", n, p, s.wall.Round(100*time.Millisecond))
	return s, nil
}

// copyNote says how the first eval copied the workspace.
func (b *bench) copyNote() string {
	data, err := os.ReadFile(filepath.Join(b.resultsDir, "1", "eval.json"))
	if err != nil {
		return ""
	}
	var e struct {
		Mounts []struct {
			Copy struct{ Files, Cloned int }
		}
	}
	if json.Unmarshal(data, &e) != nil || len(e.Mounts) != 1 {
		return ""
	}
	how := "plain copies (no reflinks on this file system)"
	if c := e.Mounts[0].Copy; c.Cloned > 0 && c.Cloned == c.Files {
		how = "reflinked copies"
	}
	return fmt.Sprintf("%d files of 16 KiB, %s", b.files, how)
}

// cleanup removes the work directory (unless kept) and reports QEMU
// processes of this program that are still there.
func (b *bench) cleanup() error {
	var left []string
	if b.vmDir != "" {
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			data, err := os.ReadFile(p)
			if err == nil && bytes.Contains(data, []byte(b.vmDir+"/")) {
				left = append(left, filepath.Base(filepath.Dir(p)))
			}
		}
		os.RemoveAll(b.vmDir)
	}
	if b.tempWork {
		os.RemoveAll(b.work)
	}
	if len(left) > 0 {
		return fmt.Errorf("processes of this program's VMs are left: %s", strings.Join(left, " "))
	}
	return nil
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// print writes the table and the raw samples.
func (r *results) print(w io.Writer) {
	var singles []time.Duration
	for _, s := range r.single {
		singles = append(singles, s.wall)
	}
	one := median(singles)
	fmt.Fprintf(w, "eval fan-out: %d host CPUs; workspace: %s; P = %d; lone runs: %d, median %.1fs\n\n",
		r.hostCPUs, r.copy, r.parallel, len(singles), one.Seconds())
	fmt.Fprintln(w, "| runs (N) | eval wall | N × one run | ratio | runs/min | boot (median) | command (median) |")
	fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, n := range r.counts {
		ss := r.evals[n]
		if len(ss) == 0 {
			continue
		}
		var walls, boots, cmds []time.Duration
		for _, s := range ss {
			walls = append(walls, s.wall)
			for _, run := range s.runs {
				boots = append(boots, ms(run.BootMS))
				cmds = append(cmds, ms(run.CommandMS))
			}
		}
		wall := median(walls)
		seq := time.Duration(n) * one
		ratio := 0.0
		if seq > 0 {
			ratio = wall.Seconds() / seq.Seconds()
		}
		fmt.Fprintf(w, "| %d | %.1fs | %.1fs | %.2f | %.1f | %.1fs | %.1fs |\n", n, wall.Seconds(), seq.Seconds(), ratio,
			float64(n)/wall.Minutes(), median(boots).Seconds(), median(cmds).Seconds())
	}
	fmt.Fprintln(w, "\nraw samples (seconds):")
	fmt.Fprintf(w, "  lone runs: %s\n", secs(singles))
	for _, n := range r.counts {
		var walls []time.Duration
		for _, s := range r.evals[n] {
			walls = append(walls, s.wall)
		}
		fmt.Fprintf(w, "  N=%d: %s\n", n, secs(walls))
	}
}

func secs(ds []time.Duration) string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%.1f", d.Seconds()))
	}
	return strings.Join(out, " ")
}
