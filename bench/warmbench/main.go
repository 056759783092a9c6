package main

import (
	"context"
	"errors"
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
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/bench/internal/vmbench"
	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/machine/qemu"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/snapshot"
)

// Bounds of every wait.
const (
	setupTimeout = 15 * time.Minute // the fixture and its image
	startLimit   = 5 * time.Minute  // one start, or a batch's, to its first exec
	bootTimeout  = 4 * time.Minute  // a machine's boot, under load
	execLimit    = 60 * time.Second // one exec of true
	stopLimit    = 2 * time.Minute  // stopping every sandbox left
	maxBatch     = 16               // the largest batch -batches may ask for
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("warmbench", flag.ContinueOnError)
	flags.SetOutput(stderr)
	n := flags.Int("n", 3, "starts of each kind to time, alternated")
	batches := flags.String("batches", "1,4,8", "numbers of sandboxes started at once, comma-separated")
	idle := flags.Duration("idle", 5*time.Second, "how long a batch idles before its memory is read")
	work := flags.String("work", "", "work directory, kept afterwards (default: a temporary directory, removed)")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	sizes, err := parseBatches(*batches)
	if err != nil || *n < 1 || *n > 50 || *idle < 0 || *idle > 5*time.Minute || flags.NArg() > 0 {
		if err != nil {
			fmt.Fprintln(stderr, "warmbench:", err)
		}
		fmt.Fprintln(stderr, "usage: go run ./bench/warmbench [-n 3] [-batches 1,4,8] [-idle 5s] [-work DIR]")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	b := &bench{n: *n, batches: sizes, idle: *idle, log: vmbench.Log{W: stderr, Name: "warmbench"}}
	res := &results{n: *n}
	err = b.run(ctx, *work, res)
	cleanErr := b.cleanup()
	res.print(stdout)
	return vmbench.Exit(ctx, "warmbench", stderr, err, cleanErr)
}

// parseBatches parses -batches: distinct counts from 1 to maxBatch.
func parseBatches(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 || k > maxBatch {
			return nil, fmt.Errorf("-batches: %q is not a count from 1 to %d", f, maxBatch)
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// bench is one run of the benchmark and what it started.
type bench struct {
	n       int
	batches []int
	idle    time.Duration
	log     vmbench.Log

	removeWork func()
	base       string // short: the machines' directories
	spec       sandbox.Spec
	auth       *ca.Authority
	snapDir    string
	cache      *snapshot.Cache // loaded once, by the saved start
	count      int             // sandboxes started, for their names

	mu    sync.Mutex
	alive []*sandbox.Sandbox // stopped by cleanup
}

// sample is one start, timed from sandbox.Start's call.
type sample struct {
	started  sandbox.Started
	returned time.Duration // Start returned
	answered time.Duration // the first exec answered
	pid      int           // QEMU's
}

func (b *bench) run(ctx context.Context, work string, res *results) error {
	if err := b.setup(ctx, work, res); err != nil {
		return err
	}
	// The first start of the shape saves it, and loads the process's
	// cache.
	b.log.Printf("first start of the shape: boot, save, resume")
	saved, err := b.start(ctx, b.cache)
	if err != nil {
		return err
	}
	if saved.started.How != sandbox.Saved {
		return fmt.Errorf("the first start was %q (%s), not a saved one", saved.started.How, saved.started.Warning)
	}
	res.saved = saved
	b.log.Printf("saved start: first exec at %s (save %s)", vmbench.Seconds(saved.answered), vmbench.Seconds(saved.started.Save))
	if err := b.stopAll(ctx); err != nil {
		return err
	}
	if res.files, err = snapshotFiles(filepath.Join(b.snapDir, saved.started.Snapshot)); err != nil {
		return err
	}

	// Cold and warm, alternated; which goes first alternates too.
	for round := range b.n {
		kinds := []string{"cold", "warm-fresh", "warm-loaded"}
		if round%2 == 1 {
			slices.Reverse(kinds)
		}
		for _, kind := range kinds {
			s, err := b.startOne(ctx, kind)
			if err != nil {
				return fmt.Errorf("%s start, round %d: %w", kind, round+1, err)
			}
			b.log.Printf("%s start, round %d of %d: first exec at %s (%s)", kind, round+1, b.n, vmbench.Seconds(s.answered), s.started.How)
			switch kind {
			case "cold":
				res.cold = append(res.cold, s)
			case "warm-fresh":
				res.warmFresh = append(res.warmFresh, s)
			default:
				res.warmLoaded = append(res.warmLoaded, s)
			}
		}
	}

	// Batches, each measured once idle.
	for i, k := range b.batches {
		order := []bool{false, true}
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, warm := range order {
			br, err := b.batch(ctx, k, warm)
			if err != nil {
				return fmt.Errorf("%s batch of %d: %w", kindName(warm), k, err)
			}
			b.log.Printf("%s batch of %d: all answered at %s; per sandbox PSS %s, RSS %s", kindName(warm), k,
				vmbench.Seconds(br.all), mib(br.pss), mib(br.rss))
			res.batches = append(res.batches, br)
		}
	}
	return nil
}

func kindName(warm bool) string {
	if warm {
		return "warm"
	}
	return "cold"
}

// setup makes the fixture and its image and opens the snapshot cache.
func (b *bench) setup(ctx context.Context, work string, res *results) error {
	sctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	fix, remove, err := vmbench.Setup(sctx, b.log, work, "making the test sandbox in %s (guest agent, kernel and busybox packages, image)")
	b.removeWork = remove
	if err != nil {
		return err
	}
	cfg, img, err := fix.Build(sctx)
	if err != nil {
		return err
	}
	lsb := cfg.Sandboxes[machinetest.Sandbox]
	if lsb == nil {
		return fmt.Errorf("%s declares no sandbox %q", fix.Dir, machinetest.Sandbox)
	}
	si, err := pipeline.SandboxImage(img)
	if err != nil {
		return err
	}
	memory := lsb.Memory
	if memory <= 0 {
		memory = 512 << 20
	}
	b.spec = sandbox.Spec{Image: si, CPUs: lsb.CPUs, Memory: memory, BootTimeout: bootTimeout}
	res.cpus, res.memory = max(lsb.CPUs, 1), memory
	res.hostCPUs = runtime.NumCPU()
	host, err := qemu.Probe(sctx)
	if err != nil {
		return err
	}
	res.qemu = vmbench.QEMU(host, host.QEMU["amd64"])
	if b.auth, err = ca.New(); err != nil {
		return err
	}
	// Unix socket paths are short, whatever -work is.
	if b.base, err = os.MkdirTemp("", "sbxw-"); err != nil {
		return err
	}
	b.snapDir = filepath.Join(fix.Dir, "snapshots")
	os.RemoveAll(b.snapDir) // a kept work directory's: the first start must save
	b.cache, err = snapshot.Open(b.snapDir)
	return err
}

// start starts one sandbox from cache (nil: cold), runs true in it and
// keeps it running.
func (b *bench) start(ctx context.Context, cache *snapshot.Cache) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, startLimit)
	defer cancel()
	b.mu.Lock()
	b.count++
	spec := b.spec
	spec.Name = fmt.Sprintf("warm%d", b.count)
	b.mu.Unlock()
	begin := time.Now()
	sb, err := sandbox.Start(ctx, spec, sandbox.Options{Dir: b.base, CA: b.auth, Snapshots: cache})
	if err != nil {
		return sample{}, err
	}
	s := sample{started: sb.Started(), returned: time.Since(begin), pid: sb.Machine().Pid()}
	b.mu.Lock()
	b.alive = append(b.alive, sb)
	b.mu.Unlock()
	ectx, ecancel := context.WithTimeout(ctx, execLimit)
	defer ecancel()
	st, err := sb.Exec(ectx, guestconn.Cmd{Args: []string{"true"}})
	if err != nil {
		return sample{}, fmt.Errorf("%s: exec true: %w", spec.Name, err)
	}
	s.answered = time.Since(begin)
	if !st.Success() {
		return sample{}, fmt.Errorf("%s: true exited %d %s", spec.Name, st.Code, st.Signal)
	}
	if cache != nil && s.started.How == sandbox.Cold {
		return sample{}, fmt.Errorf("%s: a warm start booted: %s", spec.Name, s.started.Warning)
	}
	return s, nil
}

// startOne times one start of kind and stops the sandbox.
func (b *bench) startOne(ctx context.Context, kind string) (sample, error) {
	var cache *snapshot.Cache
	switch kind {
	case "warm-fresh":
		// What a new process pays: the snapshot verified and its
		// memory copied.
		c, err := snapshot.Open(b.snapDir)
		if err != nil {
			return sample{}, err
		}
		defer c.Close()
		cache = c
	case "warm-loaded":
		cache = b.cache
	}
	s, err := b.start(ctx, cache)
	return s, errors.Join(err, b.stopAll(ctx))
}

// batchResult is one batch of sandboxes started at once.
type batchResult struct {
	k        int
	warm     bool
	all      time.Duration // until every one answered its first exec
	samples  []sample
	pss, rss int64 // per sandbox, the mean over its QEMUs
}

// batch starts k sandboxes at once, cold or warm from the loaded cache,
// times them to their first execs, lets them idle and reads their
// QEMUs' memory, then stops them.
func (b *bench) batch(ctx context.Context, k int, warm bool) (br batchResult, err error) {
	br = batchResult{k: k, warm: warm, samples: make([]sample, k)}
	defer func() { err = errors.Join(err, b.stopAll(ctx)) }()
	var cache *snapshot.Cache
	if warm {
		cache = b.cache
	}
	errs := make([]error, k)
	begin := time.Now()
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() { br.samples[i], errs[i] = b.start(ctx, cache) })
	}
	wg.Wait()
	br.all = time.Since(begin)
	if err := errors.Join(errs...); err != nil {
		return br, err
	}
	select {
	case <-ctx.Done():
		return br, ctx.Err()
	case <-time.After(b.idle):
	}
	for _, s := range br.samples {
		u, err := readRollup(s.pid)
		if err != nil {
			return br, err
		}
		br.pss += u.Pss
		br.rss += u.Rss
	}
	br.pss /= int64(k)
	br.rss /= int64(k)
	return br, nil
}

// stopAll stops every sandbox running, at once.
func (b *bench) stopAll(ctx context.Context) error {
	b.mu.Lock()
	alive := b.alive
	b.alive = nil
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopLimit)
	defer cancel()
	errs := make([]error, len(alive))
	var wg sync.WaitGroup
	for i, sb := range alive {
		wg.Go(func() { errs[i] = sb.Stop(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// cleanup stops what is left and removes what the run made.
func (b *bench) cleanup() error {
	err := b.stopAll(context.Background())
	if b.cache != nil {
		b.cache.Close()
	}
	if b.base != "" {
		os.RemoveAll(b.base)
	}
	if b.removeWork != nil {
		b.removeWork()
	}
	return err
}

// snapshotFile is one of a snapshot's files on disk.
type snapshotFile struct {
	name            string
	size, allocated int64
}

// snapshotFiles reads the sizes of a snapshot's files: apparent and
// allocated.
func snapshotFiles(dir string) ([]snapshotFile, error) {
	var out []snapshotFile
	for _, name := range []string{snapshot.StateFile, snapshot.MemoryFile, snapshot.DiskFile, snapshot.MetaFile} {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(dir, name), &st); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
		}
		out = append(out, snapshotFile{name: name, size: st.Size, allocated: st.Blocks * 512})
	}
	return out, nil
}

// usage is the memory of a process as smaps_rollup counts it.
type usage struct{ Rss, Pss int64 }

// readRollup reads a process's Rss and Pss from /proc/PID/smaps_rollup.
func readRollup(pid int) (usage, error) {
	path := fmt.Sprintf("/proc/%d/smaps_rollup", pid)
	b, err := os.ReadFile(path)
	if err != nil {
		return usage{}, err
	}
	return parseRollup(string(b), path)
}

// parseRollup parses the text of a smaps_rollup file; name names it in
// errors.
func parseRollup(text, name string) (usage, error) {
	var u usage
	seen := 0
	for line := range strings.Lines(text) {
		key, value, ok := strings.Cut(line, ":")
		if !ok || (key != "Rss" && key != "Pss") {
			continue
		}
		n, err := vmbench.Kilobytes(value)
		if err != nil {
			return usage{}, fmt.Errorf("%s: %s: %w", name, key, err)
		}
		if key == "Rss" {
			u.Rss = n
		} else {
			u.Pss = n
		}
		seen++
	}
	if seen != 2 {
		return usage{}, fmt.Errorf("%s has no Rss or no Pss line", name)
	}
	return u, nil
}
