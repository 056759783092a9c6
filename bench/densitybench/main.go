package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/bench/internal/vmbench"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/machine/qemu"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"github.com/sbx-dev/sbx/lang"
)

// Timeouts of every wait.
const (
	setupTimeout = 15 * time.Minute // the fixture, its image and sbx
	bootLimit    = 3 * time.Minute  // one machine or supervised sandbox to run
	execLimit    = 3 * time.Minute  // one command in a guest
	stopLimit    = 3 * time.Minute  // stopping every supervisor
	goneLimit    = 30 * time.Second // QEMUs exiting after the stops
	freeWait     = 20 * time.Second // a freed guest's memory returning
)

// The workload run in each configuration's guest.
const (
	gofmtRuns  = 3        // timed, after one untimed
	gofmtFiles = 12       // the largest non-test files of go/types
	shaBytes   = 16 << 20 // hashed from /dev/zero
	shaRuns    = 2
	fillMiB    = 512 // written to a tmpfs in the guest, then freed
)

const usageLine = "usage: go run ./bench/densitybench [-n 1] [-buffers 24,32] [-memory 1024] [-max 64] [-reserve 4] [-count-time 10m] [-parallel 2] [-idle 20s] [-work DIR]"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is what the flags set.
type config struct {
	rounds    int
	memory    int64 // bytes
	max       int
	reserve   int64 // bytes
	countTime time.Duration
	parallel  int
	idle      time.Duration
	buffers   []int // further translation buffer sizes to measure, MiB
	work      string
}

// variant is one machine configuration measured side by side.
type variant struct {
	name   string
	legacy bool
	buffer int // MiB; 0 is qemu.TCGBufferMiB
}

// variants returns the old machine, the new one and the new one with
// each further buffer size.
func (c config) variants() []variant {
	v := []variant{{name: "old", legacy: true}, {name: "new"}}
	for _, b := range c.buffers {
		v = append(v, variant{name: fmt.Sprintf("new, %d MiB buffer", b), buffer: b})
	}
	return v
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("densitybench", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var c config
	var memMiB int
	var reserveGiB float64
	flags.IntVar(&c.rounds, "n", 1, "rounds of the old and the new machine, side by side")
	flags.IntVar(&memMiB, "memory", 1024, "guest RAM of every sandbox, in MiB")
	flags.IntVar(&c.max, "max", 64, "most idle sandboxes to hold at once (0: skip the count)")
	flags.Float64Var(&reserveGiB, "reserve", 4, "host MemAvailable, in GiB, the count never goes below")
	flags.DurationVar(&c.countTime, "count-time", 10*time.Minute, "time bound on booting sandboxes for the count")
	flags.IntVar(&c.parallel, "parallel", 2, "sandboxes booted at once for the count")
	flags.DurationVar(&c.idle, "idle", 20*time.Second, "how long sandboxes idle before their memory is read")
	buffers := flags.String("buffers", "", "further TCG translation buffer sizes to measure the new machine with, in MiB, comma-separated")
	flags.StringVar(&c.work, "work", "", "work directory, kept afterwards (default: a temporary directory, removed)")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if c.rounds < 1 || memMiB < 128 || c.max < 0 || reserveGiB < 0 || c.parallel < 1 || c.countTime <= 0 || c.idle < 0 || flags.NArg() > 0 {
		fmt.Fprintln(stderr, usageLine)
		return 2
	}
	for f := range strings.SplitSeq(*buffers, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 4096 {
			fmt.Fprintf(stderr, "densitybench: -buffers: %q is not a size in MiB\n%s\n", f, usageLine)
			return 2
		}
		c.buffers = append(c.buffers, n)
	}
	c.memory = int64(memMiB) << 20
	c.reserve = int64(reserveGiB * (1 << 30))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b := &bench{config: c, log: stderr}
	res := &results{config: c}
	err := b.run(ctx, res)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("interrupted: %w", err)
	}
	cleanErr := b.cleanup()
	res.print(stdout)
	code := 0
	if err != nil {
		fmt.Fprintf(stderr, "densitybench: %v\n", err)
		code = 1
	}
	if cleanErr != nil {
		fmt.Fprintf(stderr, "densitybench: %v\n", cleanErr)
		code = 1
	}
	return code
}

// bench is one run and what it started.
type bench struct {
	config
	log io.Writer

	workDir  string // absolute
	tempWork bool
	base     string // short: machines' and supervisors' directories
	fix      *machinetest.Fixture
	cfg      *lang.Config
	sb       *lang.Sandbox
	img      *image.Result
	host     qemu.Host
	sbx      string
	environ  []string
	sources  []string // the gofmt workload's files

	mu       sync.Mutex
	machines []*machine.Machine // started in this process
	sups     []*sandbox         // spawned supervisors
}

// sandbox is one supervised sandbox of the count.
type sandbox struct {
	name   string
	dir    string
	status *supervisor.Status
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "%s densitybench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (b *bench) run(ctx context.Context, res *results) error {
	if err := b.setup(ctx); err != nil {
		return err
	}
	res.host = b.host
	res.qemu = b.host.QEMU["amd64"]
	res.hostCPUs = runtime.NumCPU()
	res.memTotal, _ = memTotal()
	res.variants = b.variants()
	res.samples = make([][]sample, len(res.variants))
	for round := 1; round <= b.rounds; round++ {
		for i, v := range res.variants {
			s, err := b.sample(ctx, v, round)
			if err != nil {
				return err
			}
			res.samples[i] = append(res.samples[i], s)
		}
	}
	if b.max == 0 {
		return nil
	}
	res.count = &countResult{}
	return b.count(ctx, res.count)
}

// setup makes the fixture and its image, probes QEMU, builds sbx and
// picks the workload's files.
func (b *bench) setup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	mod, err := os.ReadFile("go.mod")
	if err != nil || !strings.HasPrefix(string(mod), "module github.com/sbx-dev/sbx\n") {
		return errors.New("run densitybench from the root of the sbx repository (go run ./bench/densitybench)")
	}
	if _, err := machinetest.QEMU(); err != nil {
		return err
	}
	work := b.work
	if work == "" {
		if work, err = os.MkdirTemp("", "densitybench-"); err != nil {
			return err
		}
		b.tempWork = true
	}
	if b.workDir, err = filepath.Abs(work); err != nil {
		return err
	}
	if err := os.MkdirAll(b.workDir, 0o755); err != nil {
		return err
	}
	// Unix socket paths are short, whatever -work is.
	if b.base, err = os.MkdirTemp("", "sbxd-"); err != nil {
		return err
	}
	tmp := filepath.Join(b.base, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	b.logf("making the test sandbox in %s (guest agent, kernel and busybox packages, image)", b.workDir)
	// A kept -work holds hard links to the shared package cache, which
	// New would write through.
	for _, name := range []string{"kernel.deb", "busybox.deb"} {
		if err := os.Remove(filepath.Join(b.workDir, "config", name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if b.fix, err = machinetest.New(ctx, b.workDir); err != nil {
		return err
	}
	if b.cfg, b.img, err = b.fix.Build(ctx); err != nil {
		return err
	}
	if b.sb = b.cfg.Sandboxes[machinetest.Sandbox]; b.sb == nil {
		return fmt.Errorf("%s declares no sandbox %q", b.fix.Dir, machinetest.Sandbox)
	}
	if b.host, err = qemu.Probe(ctx); err != nil {
		return err
	}
	if _, ok := b.host.QEMU["amd64"]; !ok {
		return errors.New("qemu.Probe found no emulator for amd64 guests")
	}
	if b.sources, err = gofmtSources(ctx); err != nil {
		return err
	}
	if b.max > 0 {
		b.logf("building sbx")
		b.sbx = filepath.Join(b.workDir, "bin", "sbx")
		build := exec.CommandContext(ctx, "go", "build", "-o", b.sbx, "./cmd/sbx")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/sbx: %v\n%s", err, out)
		}
		b.environ = append(slices.Clone(b.fix.Environ), "SBX_RUNTIME_DIR="+b.base, "TMPDIR="+tmp)
	}
	return nil
}

// gofmtSources returns gofmt and the largest non-test Go files of the
// toolchain's go/types, the broad workload: a Go program whose code
// (the runtime, the parser and the printer) is large enough that a
// small translation buffer is refilled while it runs.
func gofmtSources(ctx context.Context) ([]string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOROOT: %w", err)
	}
	root := strings.TrimSpace(string(out))
	gofmt := filepath.Join(root, "bin", "gofmt")
	if _, err := os.Stat(gofmt); err != nil {
		return nil, err
	}
	files, _ := filepath.Glob(filepath.Join(root, "src", "go", "types", "*.go"))
	type sized struct {
		path string
		size int64
	}
	var s []sized
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		if fi, err := os.Stat(f); err == nil {
			s = append(s, sized{f, fi.Size()})
		}
	}
	if len(s) < gofmtFiles {
		return nil, fmt.Errorf("%s/src/go/types has %d Go files, want %d", root, len(s), gofmtFiles)
	}
	slices.SortFunc(s, func(a, b sized) int {
		if a.size != b.size {
			return int(b.size - a.size)
		}
		return strings.Compare(a.path, b.path)
	})
	paths := []string{gofmt}
	for _, f := range s[:gofmtFiles] {
		paths = append(paths, f.path)
	}
	return paths, nil
}

// sample boots one machine of variant v, idles it, reads its memory,
// runs the workload, reads its memory again, fills and frees fillMiB of
// its memory and reads how much of it the host got back.
func (b *bench) sample(ctx context.Context, v variant, round int) (s sample, err error) {
	what := v.name
	b.logf("round %d: booting the %s machine (%d MiB)", round, what, b.memory>>20)
	boot, err := pipeline.BootFiles(b.img)
	if err != nil {
		return s, err
	}
	m, err := machine.Start(ctx, machine.Options{
		Name: "density", Boot: boot, Memory: b.memory, Hypervisor: qemu.New(&b.host),
		Dir: b.base, BootTimeout: bootLimit, Bench: machine.Bench{Legacy: v.legacy, TCGBufferMiB: v.buffer},
	})
	if err != nil {
		return s, fmt.Errorf("%s machine: %w", what, err)
	}
	b.mu.Lock()
	b.machines = append(b.machines, m)
	b.mu.Unlock()
	defer func() {
		if serr := m.Stop(context.Background()); serr != nil && err == nil {
			err = serr
		}
	}()
	pid := m.Pid()
	s.boot = m.BootTime()
	s.uptime = time.Duration(m.Ready().UptimeMillis) * time.Millisecond
	if s.bootCPU, err = cpuTime(pid); err != nil {
		return s, err
	}
	if err := sleep(ctx, b.idle); err != nil {
		return s, err
	}
	if s.idle, err = readQEMU(pid, b.memory); err != nil {
		return s, err
	}
	b.logf("%s machine idle: overhead %s, QEMU beyond guest RAM %s RSS", what, mib(s.idle.Overhead()), mib(s.idle.Beyond().Rss))

	exec := func(script string) (timed, error) {
		ctx, cancel := context.WithTimeout(ctx, execLimit)
		defer cancel()
		var out bytes.Buffer
		c0, _ := cpuTime(pid)
		start := time.Now()
		st, err := m.Exec(ctx, guestconn.Cmd{Args: []string{"sh", "-c", script}, Stdout: &out, Stderr: &out})
		t := timed{wall: time.Since(start)}
		c1, _ := cpuTime(pid)
		t.cpu = c1 - c0
		if err == nil && !st.Success() {
			err = fmt.Errorf("%s", st)
		}
		if err != nil {
			return t, fmt.Errorf("%s machine: %q: %w\n%s", what, script, err, lastLines(out.String(), 10))
		}
		return t, nil
	}
	if _, err := exec("busybox mkdir -p /tmp/src"); err != nil {
		return s, err
	}
	for i, src := range b.sources {
		dst, mode := "/tmp/src/"+filepath.Base(src), os.FileMode(0o644)
		if i == 0 {
			dst, mode = "/tmp/gofmt", 0o755
		}
		if err := b.put(ctx, m, src, dst, mode); err != nil {
			return s, fmt.Errorf("%s machine: %w", what, err)
		}
	}
	for i := range 1 + gofmtRuns {
		t, err := exec("/tmp/gofmt -l /tmp/src")
		if err != nil {
			return s, err
		}
		if i > 0 {
			s.gofmt = append(s.gofmt, t)
		}
	}
	for range shaRuns {
		t, err := exec(fmt.Sprintf("head -c %d /dev/zero | sha256sum", shaBytes))
		if err != nil {
			return s, err
		}
		s.sha = append(s.sha, t)
	}
	if s.worked, err = readQEMU(pid, b.memory); err != nil {
		return s, err
	}
	b.logf("%s machine after the workload: overhead %s; gofmt %s, QEMU CPU %.2f s", what, mib(s.worked.Overhead()), seconds(s.gofmt[len(s.gofmt)-1].wall), s.gofmt[len(s.gofmt)-1].cpu)

	// Fill a tmpfs of the guest, then free it.
	s.ramBefore = s.worked.RAM.Rss
	fill := fmt.Sprintf("busybox mkdir -p /run/fill && busybox mount -t tmpfs -o size=%dm fill /run/fill && busybox dd if=/dev/zero of=/run/fill/f bs=1M count=%d 2>/dev/null", fillMiB+64, fillMiB)
	if _, err := exec(fill); err != nil {
		return s, err
	}
	q, err := readQEMU(pid, b.memory)
	if err != nil {
		return s, err
	}
	s.ramFilled = q.RAM.Rss
	if _, err := exec("busybox umount /run/fill"); err != nil {
		return s, err
	}
	if err := sleep(ctx, freeWait); err != nil {
		return s, err
	}
	if q, err = readQEMU(pid, b.memory); err != nil {
		return s, err
	}
	s.ramFreed = q.RAM.Rss
	b.logf("%s machine: guest RAM resident %s, %s with %d MiB written, %s %v after freeing it",
		what, mib(s.ramBefore), mib(s.ramFilled), fillMiB, mib(s.ramFreed), freeWait)
	return s, nil
}

func (b *bench) put(ctx context.Context, m *machine.Machine, src, dst string, mode os.FileMode) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(ctx, execLimit)
	defer cancel()
	return m.Put(ctx, f, dst, mode, nil)
}

// count boots supervised sandboxes of the new machine, b.parallel at a
// time, until b.max run, booting more would bring the host's
// MemAvailable below b.reserve (by the most one boot has taken so far,
// or the guest's whole RAM before the first), or b.countTime has
// passed; then it lets them idle and reads the host's and each
// sandbox's memory.
func (b *bench) count(ctx context.Context, r *countResult) error {
	var err error
	if r.availStart, err = memAvailable(); err != nil {
		return err
	}
	r.reserve = b.reserve
	deadline := time.Now().Add(b.countTime)
	perBoot := b.memory + 256<<20 // until measured
	var running []*sandbox
	b.logf("counting idle sandboxes of %d MiB: MemAvailable %s, reserve %s, at most %d, until %s",
		b.memory>>20, gib(r.availStart), gib(b.reserve), b.max, deadline.Format("15:04:05"))
	for {
		avail, err := memAvailable()
		if err != nil {
			return err
		}
		n := min(b.parallel, b.max-len(running))
		for n > 0 && avail-int64(n)*perBoot < b.reserve {
			n--
		}
		switch {
		case ctx.Err() != nil:
			r.held, r.stopped = len(running), "an interrupt"
			return ctx.Err()
		case len(running) >= b.max:
			r.stopped = fmt.Sprintf("the cap of %d sandboxes", b.max)
		case n == 0:
			r.stopped = fmt.Sprintf("the reserve: MemAvailable %s, and a boot takes up to %s", gib(avail), mib(perBoot))
		case time.Now().After(deadline):
			r.stopped = fmt.Sprintf("the time bound of %v", b.countTime)
		}
		if r.stopped != "" {
			break
		}
		batch := make([]*sandbox, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			name := fmt.Sprintf("d%03d", len(running)+i+1)
			wg.Go(func() { batch[i], errs[i] = b.spawn(ctx, name) })
		}
		wg.Wait()
		for i, s := range batch {
			if errs[i] == nil {
				running = append(running, s)
			}
		}
		if err := errors.Join(errs...); err != nil {
			// A boot that fails on a loaded host ends the count; the
			// sandboxes that run are still measured.
			if ctx.Err() != nil {
				r.held, r.stopped = len(running), "an interrupt"
				return err
			}
			first, _, _ := strings.Cut(err.Error(), "\n")
			r.stopped = "a failed boot: " + first
			b.logf("%v", err)
			break
		}
		after, err := memAvailable()
		if err != nil {
			return err
		}
		// Memory other work on the host frees can make this negative;
		// then the estimate stands.
		if took := (avail - after) / int64(n); took > 0 && (len(running) == n || took > perBoot) {
			perBoot = took
		}
		b.logf("%d sandboxes run; MemAvailable %s", len(running), gib(after))
	}
	r.held = len(running)
	b.logf("held %d sandboxes, stopped by %s; letting them idle %v", r.held, r.stopped, b.idle)
	if err := sleep(ctx, b.idle); err != nil {
		return err
	}
	if r.availEnd, err = memAvailable(); err != nil {
		return err
	}
	// Idle CPU: what the held sandboxes' QEMUs use over ten seconds.
	const window = 10 * time.Second
	var cpu0 float64
	for _, s := range running {
		c, _ := cpuTime(s.status.QEMUPid)
		cpu0 += c
	}
	if err := sleep(ctx, window); err != nil {
		return err
	}
	var cpu1 float64
	for _, s := range running {
		c, _ := cpuTime(s.status.QEMUPid)
		cpu1 += c
		q, err := readQEMU(s.status.QEMUPid, b.memory)
		if err != nil {
			return fmt.Errorf("sandbox %s: %w", s.name, err)
		}
		sup, err := readRollup(s.status.Pid)
		if err != nil {
			return fmt.Errorf("sandbox %s's supervisor: %w", s.name, err)
		}
		r.qemu = append(r.qemu, q)
		r.sup = append(r.sup, sup)
	}
	r.idleCores = (cpu1 - cpu0) / window.Seconds()
	r.load = loadAverage()
	return nil
}

// spawn starts a supervised sandbox of the fixture named name, with
// b.memory of guest RAM, as "sbx supervise", and returns once it runs.
func (b *bench) spawn(ctx context.Context, name string) (*sandbox, error) {
	dir, err := supervisor.SandboxDir(b.base, b.fix.Dir, name)
	if err != nil {
		return nil, err
	}
	s := &sandbox{name: name, dir: dir}
	b.mu.Lock()
	b.sups = append(b.sups, s)
	b.mu.Unlock()
	spec, err := pipeline.SandboxSpec(b.cfg, b.sb, b.img)
	if err != nil {
		return nil, err
	}
	spec.Name, spec.Memory = name, b.memory
	start := time.Now()
	st, err := supervisor.Spawn(ctx, dir, spec, supervisor.SpawnOptions{
		Command:      []string{b.sbx, supervisor.Verb},
		Env:          b.environ,
		ReadyTimeout: bootLimit,
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", name, err)
	}
	s.status = st
	b.logf("sandbox %s runs after %s (QEMU %d)", name, seconds(time.Since(start)), st.QEMUPid)
	return s, nil
}

// cleanup stops every machine and supervisor this run started, waits
// for their QEMUs to exit, kills any left and removes the temporary
// directories. It is an error when a QEMU was left.
func (b *bench) cleanup() error {
	b.mu.Lock()
	machines, sups := slices.Clone(b.machines), slices.Clone(b.sups)
	b.mu.Unlock()
	var errs []error
	var mu sync.Mutex
	ctx, cancel := context.WithTimeout(context.Background(), stopLimit)
	defer cancel()
	var wg sync.WaitGroup
	for _, m := range machines {
		wg.Go(func() { m.Stop(ctx) })
	}
	if len(sups) > 0 {
		b.logf("stopping %d supervised sandboxes", len(sups))
	}
	// Stopping a guest takes CPU; a few at a time.
	sem := make(chan struct{}, 8)
	for _, s := range sups {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := supervisor.Stop(ctx, s.dir); err != nil && !errors.Is(err, supervisor.ErrNotRunning) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	var left []int
	if b.base != "" {
		deadline := time.Now().Add(goneLimit)
		for {
			left = qemuProcesses(b.base)
			if len(left) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		for _, pid := range left {
			// Package qemu starts QEMU as the leader of its own
			// process group.
			syscall.Kill(-pid, syscall.SIGKILL)
		}
		if len(left) > 0 {
			errs = append(errs, fmt.Errorf("QEMU processes %v were still running %v after every sandbox was stopped; killed them", left, goneLimit))
		}
		for _, s := range sups {
			if s.status != nil && alive(s.status.Pid) && cmdlineHas(s.status.Pid, b.base) {
				syscall.Kill(s.status.Pid, syscall.SIGKILL)
				errs = append(errs, fmt.Errorf("the supervisor of %s (pid %d) was still running after it was stopped; killed it", s.name, s.status.Pid))
			}
		}
		if len(left) == 0 {
			os.RemoveAll(b.base)
		}
	}
	if b.tempWork && len(left) == 0 {
		os.RemoveAll(b.workDir)
	}
	if len(machines)+len(sups) > 0 && len(errs) == 0 {
		b.logf("every QEMU this run started has exited")
	}
	return errors.Join(errs...)
}

// qemuProcesses returns the pids of the QEMU system emulators whose
// arguments mention dir: the ones this run made, whichever process
// started them.
func qemuProcesses(dir string) []int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if !strings.HasPrefix(filepath.Base(args[0]), "qemu-system-") || !slices.ContainsFunc(args[1:], func(a string) bool { return strings.Contains(a, dir) }) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && alive(pid) {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

func cmdlineHas(pid int, s string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && s != "" && bytes.Contains(b, []byte(s))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// memTotal reads MemTotal from /proc/meminfo.
func memTotal() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			return vmbench.Kilobytes(v)
		}
	}
	return 0, errors.New("/proc/meminfo has no MemTotal line")
}

// loadAverage returns the host's one-minute load average, as text.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
