package main

import (
	"bufio"
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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/bench/internal/vmbench"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/machine/qemu"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"github.com/sbx-dev/sbx/lang"
)

// How many exec round trips are timed, and the sandboxes of the memory
// measurement.
const (
	supervisorExecs = 50
	cliExecs        = 10
	execWarmups     = 3
	sandboxes       = 4
	idle            = 10 * time.Second
)

// Timeouts of every wait.
const (
	setupTimeout   = 15 * time.Minute // the fixture, its image and sbx
	baselineLimit  = 2 * time.Minute  // one bare QEMU boot to its power-off
	sbxRunLimit    = 3 * time.Minute  // one sbx run
	spawnLimit     = 3 * time.Minute  // one supervised sandbox to run
	execLimit      = 30 * time.Second // one exec, by either path
	stopLimit      = 90 * time.Second // stopping every supervisor
	goneLimit      = 30 * time.Second // QEMUs exiting after the stops
	interruptDelay = 30 * time.Second // a child's graceful end after SIGTERM
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("sandboxbench", flag.ContinueOnError)
	flags.SetOutput(stderr)
	n := flags.Int("n", 5, "boots of each kind to time, alternated, after one warm-up of each")
	work := flags.String("work", "", "work directory, kept afterwards (default: a temporary directory, removed)")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if *n < 1 || flags.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: go run ./bench/sandboxbench [-n 5] [-work DIR]")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	b := &bench{n: *n, log: vmbench.Log{W: stderr, Name: "sandboxbench"}}
	res := &results{n: *n}
	err := b.run(ctx, *work, res)
	cleanErr := b.cleanup()
	res.print(stdout)
	return vmbench.Exit(ctx, "sandboxbench", stderr, err, cleanErr)
}

// bench is one run of the benchmark and what it started.
type bench struct {
	n   int
	log vmbench.Log

	work       string // absolute; the fixture, its cache and sbx
	removeWork func() // removes a temporary work directory
	base       string // short: supervisors' directories, sbx's temporary files
	fix        *machinetest.Fixture
	cfg        *lang.Config
	sb         *lang.Sandbox
	img        *image.Result
	memory     int64    // the guest's RAM, in bytes
	cmdline    []string // the image's kernel parameters
	host       qemu.Host
	qemuPath   string
	sbx        string   // the sbx binary built from this tree
	environ    []string // sbx's environment

	started bool // a QEMU or sbx was started

	mu   sync.Mutex
	sups []*sandbox // every supervisor spawned, stopped by cleanup
}

// sandbox is one supervised sandbox.
type sandbox struct {
	name   string
	dir    string
	status *supervisor.Status
}

func (b *bench) run(ctx context.Context, work string, res *results) error {
	if err := b.setup(ctx, work); err != nil {
		return err
	}
	res.host = b.host
	res.qemu = b.host.QEMU["amd64"]
	res.cpus = b.sb.CPUs
	res.memory = b.memory
	res.hostCPUs = runtime.NumCPU()
	if err := b.boots(ctx, res); err != nil {
		return err
	}

	// One supervised sandbox: its memory once idle, then exec round trips.
	first, err := b.spawn(ctx, machinetest.Sandbox)
	if err != nil {
		return err
	}
	if err := b.idle(ctx); err != nil {
		return err
	}
	if res.mem1, err = b.measureMemory([]*sandbox{first}); err != nil {
		return err
	}
	if err := b.execs(ctx, first, res); err != nil {
		return err
	}

	// Then four.
	all := make([]*sandbox, sandboxes)
	all[0] = first
	errs := make([]error, sandboxes)
	var wg sync.WaitGroup
	for i := 1; i < sandboxes; i++ {
		wg.Go(func() { all[i], errs[i] = b.spawn(ctx, machinetest.Sandbox+"-"+strconv.Itoa(i+1)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := b.idle(ctx); err != nil {
		return err
	}
	res.mem4, err = b.measureMemory(all)
	return err
}

// setup makes the fixture and its image, probes QEMU and builds sbx.
func (b *bench) setup(ctx context.Context, work string) error {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	var err error
	if b.qemuPath, err = vmbench.Preflight("sandboxbench"); err != nil {
		return err
	}
	if b.work, b.removeWork, err = vmbench.WorkDir("sandboxbench", work); err != nil {
		return err
	}
	// Unix socket paths are short, whatever -work is.
	if b.base, err = os.MkdirTemp("", "sbxb-"); err != nil {
		return err
	}
	tmp := filepath.Join(b.base, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}

	b.log.Printf("making the test sandbox in %s (guest agent, kernel and busybox packages, image)", b.work)
	if b.fix, err = vmbench.NewFixture(ctx, b.work); err != nil {
		return err
	}
	if b.cfg, b.img, err = b.fix.Build(ctx); err != nil {
		return err
	}
	b.sb = b.cfg.Sandboxes[machinetest.Sandbox]
	if b.sb == nil {
		return fmt.Errorf("%s declares no sandbox %q", b.fix.Dir, machinetest.Sandbox)
	}
	b.memory = b.sb.Memory
	if b.memory <= 0 {
		b.memory = 512 << 20
	}
	b.memory = (b.memory + 1<<20 - 1) &^ (1<<20 - 1)
	manifest, err := image.ReadManifest(b.img.Manifest)
	if err != nil {
		return err
	}
	b.cmdline = strings.Fields(manifest.Cmdline)
	if b.host, err = qemu.Probe(ctx); err != nil {
		return err
	}
	if _, ok := b.host.QEMU["amd64"]; !ok {
		return errors.New("qemu.Probe found no emulator for amd64 guests")
	}

	b.log.Printf("building sbx")
	b.sbx = filepath.Join(b.work, "bin", "sbx")
	build := exec.CommandContext(ctx, "go", "build", "-o", b.sbx, "./cmd/sbx")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/sbx: %v\n%s", err, out)
	}
	// sbx finds the supervisors under SBX_RUNTIME_DIR, and the machine
	// of sbx run makes its directory (its overlay, sockets and console)
	// in TMPDIR: both under base, where cleanup finds their QEMUs.
	b.environ = append(append([]string(nil), b.fix.Environ...), "SBX_RUNTIME_DIR="+b.base, "TMPDIR="+tmp)
	return nil
}

// boots times bare QEMU and sbx run, alternated, after a warm-up of each.
func (b *bench) boots(ctx context.Context, res *results) error {
	b.started = true
	for round := 0; round <= b.n; round++ {
		what := fmt.Sprintf("round %d of %d", round, b.n)
		if round == 0 {
			what = "warm-up (not counted)"
		}
		bs, err := b.baseline(ctx)
		if err != nil {
			return fmt.Errorf("bare QEMU, %s: %w", what, err)
		}
		b.log.Printf("bare QEMU, %s: first console line %s, ready line %s, exit %s",
			what, vmbench.Seconds(bs.first), orNone(bs.ready, vmbench.Seconds), vmbench.Seconds(bs.exit))
		d, err := b.sbxRun(ctx)
		if err != nil {
			return fmt.Errorf("sbx run, %s: %w", what, err)
		}
		b.log.Printf("sbx run, %s: %s", what, vmbench.Seconds(d))
		if round == 0 {
			res.warmBaseline, res.warmRun = bs, d
			res.firstLine = bs.firstLine
			continue
		}
		res.firstLines = append(res.firstLines, bs.first)
		if bs.ready > 0 {
			res.readyLines = append(res.readyLines, bs.ready)
			res.guestUptime = append(res.guestUptime, time.Duration(bs.readyInfo.UptimeMillis)*time.Millisecond)
		}
		res.baseExits = append(res.baseExits, bs.exit)
		res.sbxRuns = append(res.sbxRuns, d)
	}
	return nil
}

// baselineSample is one bare QEMU boot, timed from the process's start.
type baselineSample struct {
	first     time.Duration // the first console line
	firstLine string
	ready     time.Duration // the agent's ready line; 0 when none came
	readyInfo bootproto.Ready
	exit      time.Duration // QEMU's exit
}

// baselineArgv is the bare QEMU command line: the fixture's kernel,
// initramfs and root disk, on the machine sbx uses (q35, the
// accelerator qemu.Probe picked, "max" CPU under TCG, the sandbox's
// CPUs and memory, a virtio-rng like sbx's), with the serial console on
// standard output. It has none of sbx's kernel parameters (sbx.mode and
// the rest), so the agent runs in its default mode, ready-poweroff: it
// mounts the root disk, prints its ready line and powers off, which ends
// QEMU. The disk is opened with snapshot=on, so the image is never
// written. Unlike sbx it has no QMP socket, no virtio-serial ports and
// no per-boot qcow2 overlay file.
func (b *bench) baselineArgv() []string {
	accel := b.host.Accel("amd64")
	cpu := "host"
	accelOpt := string(accel)
	if accel == qemu.AccelTCG {
		cpu = "max"
		if b.sb.CPUs > 1 {
			accelOpt += ",thread=multi"
		}
		accelOpt += ",tb-size=" + strconv.Itoa(qemu.TCGBufferMiB)
	}
	cpus := max(b.sb.CPUs, 1)
	params := append([]string{"console=ttyS0", "panic=-1"}, b.cmdline...)
	// Package machine boots with "quiet", after which the kernel prints
	// nothing at all and the first console line is the agent's ready
	// line. The kernel's notices (about twenty lines, its banner first)
	// give the console a first line to time for a couple of KiB more
	// console output.
	params = append(params, "loglevel=6")
	return []string{b.qemuPath,
		"-name", "sandboxbench-baseline",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-machine", "q35,sata=off,smbus=off,vmport=off,smm=off", "-accel", accelOpt, "-cpu", cpu,
		"-smp", strconv.Itoa(cpus), "-m", strconv.FormatInt(b.memory>>20, 10),
		"-kernel", b.img.Outputs[image.OutputKernel].Path,
		"-initrd", b.img.Outputs[image.OutputInitramfs].Path,
		"-append", strings.Join(params, " "),
		"-serial", "stdio",
		"-drive", "if=none,id=root,format=qcow2,snapshot=on,file=" + strings.ReplaceAll(b.img.Outputs[image.OutputDisk].Path, ",", ",,"),
		"-device", "virtio-blk-pci,drive=root",
		"-object", "rng-random,id=rng0,filename=/dev/urandom",
		"-device", "virtio-rng-pci,rng=rng0",
	}
}

// baseline boots bare QEMU once and times its console.
func (b *bench) baseline(ctx context.Context) (baselineSample, error) {
	ctx, cancel := context.WithTimeout(ctx, baselineLimit)
	defer cancel()
	argv := b.baselineArgv()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return baselineSample{}, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return baselineSample{}, err
	}
	// QEMU is its own process group; end it with the context.
	stopKill := context.AfterFunc(ctx, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	defer stopKill()

	var s baselineSample
	var tail []string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		at := time.Since(start)
		line := strings.TrimRight(sc.Text(), "\r")
		if s.first == 0 && strings.TrimSpace(line) != "" {
			s.first, s.firstLine = at, line
		}
		if i := strings.Index(line, bootproto.ReadyPrefix); i >= 0 && s.ready == 0 {
			s.ready = at
			r, ok, err := bootproto.ParseReady([]byte(line[i:] + "\n"))
			if !ok || err != nil {
				return s, fmt.Errorf("the ready line %q does not decode: %v", line, err)
			}
			s.readyInfo = r
		}
		if tail = append(tail, line); len(tail) > 20 {
			tail = tail[1:]
		}
	}
	werr := cmd.Wait()
	s.exit = time.Since(start)
	console := strings.Join(tail, "\n")
	switch {
	case ctx.Err() != nil:
		return s, fmt.Errorf("QEMU did not power off within %v (%w); the console's last lines:\n%s", baselineLimit, ctx.Err(), console)
	case werr != nil:
		return s, fmt.Errorf("QEMU: %v: %s; the console's last lines:\n%s", werr, strings.TrimSpace(stderr.String()), console)
	case s.first == 0:
		return s, errors.New("QEMU exited without a console line")
	}
	if msg, ok := bootproto.ParseError([]byte(console)); ok {
		return s, fmt.Errorf("the agent reported: %s", msg)
	}
	return s, nil
}

// command returns sbx with args, ended with SIGTERM (sbx then stops its
// VM) when ctx ends, and killed if it has not gone after interruptDelay.
func (b *bench) command(ctx context.Context, out io.Writer, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, b.sbx, args...)
	cmd.Env = b.environ
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = interruptDelay
	return cmd
}

// sbxRun times one "sbx run DIR box -- true" from start to exit.
func (b *bench) sbxRun(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, sbxRunLimit)
	defer cancel()
	var out bytes.Buffer
	cmd := b.command(ctx, &out, "run", b.fix.Dir, machinetest.Sandbox, "--", "true")
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, lastLines(out.String(), 20))
	}
	return d, nil
}

// spawn starts a supervised sandbox named name, as "sbx supervise", and
// returns once it runs.
func (b *bench) spawn(ctx context.Context, name string) (*sandbox, error) {
	dir, err := supervisor.SandboxDir(b.base, b.fix.Dir, name)
	if err != nil {
		return nil, err
	}
	s := &sandbox{name: name, dir: dir}
	b.mu.Lock()
	b.started = true
	b.sups = append(b.sups, s)
	b.mu.Unlock()
	b.log.Printf("starting supervised sandbox %s", name)
	start := time.Now()
	spec, err := pipeline.SandboxSpec(b.cfg, b.sb, b.img)
	if err != nil {
		return nil, err
	}
	spec.Name, spec.Memory = name, b.memory
	st, err := supervisor.Spawn(ctx, dir, spec, supervisor.SpawnOptions{
		Command:      []string{b.sbx, supervisor.Verb},
		Env:          b.environ,
		ReadyTimeout: spawnLimit,
	})
	if err != nil {
		return nil, err
	}
	s.status = st
	b.log.Printf("sandbox %s runs after %s: supervisor %d, QEMU %d (%s)", name, vmbench.Seconds(time.Since(start)), st.Pid, st.QEMUPid, st.Accel)
	return s, nil
}

func (b *bench) idle(ctx context.Context) error {
	b.log.Printf("letting the sandboxes idle for %v", idle)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(idle):
		return nil
	}
}

// execs times exec round trips of true in s: through a client of its
// supervisor, then through the sbx exec command. An exec that fails is
// not timed but counted and reported, with its error; more than a
// quarter failing ends the run.
func (b *bench) execs(ctx context.Context, s *sandbox, res *results) error {
	b.log.Printf("timing %d execs of true through the supervisor", supervisorExecs)
	dctx, cancel := context.WithTimeout(ctx, execLimit)
	c, err := supervisor.Dial(dctx, s.dir)
	cancel()
	if err != nil {
		return err
	}
	defer c.Close()
	cmd := guestconn.Cmd{Args: []string{"true"}, User: b.sb.User, Env: b.cfg.CommandEnv(b.sb)}
	for i := range execWarmups + supervisorExecs {
		ectx, cancel := context.WithTimeout(ctx, execLimit)
		start := time.Now()
		st, err := c.Exec(ectx, cmd)
		d := time.Since(start)
		cancel()
		if err == nil && !st.Success() {
			err = fmt.Errorf("true: %s", st)
		}
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			b.log.Printf("exec %d through the supervisor failed: %v", i+1, err)
			res.execSupervisorFailed = append(res.execSupervisorFailed, err.Error())
			if len(res.execSupervisorFailed) > (execWarmups+supervisorExecs)/4 {
				return fmt.Errorf("%d execs of true through the supervisor failed, the last with: %w", len(res.execSupervisorFailed), err)
			}
			continue
		}
		if i >= execWarmups {
			res.execSupervisor = append(res.execSupervisor, d)
		}
	}

	b.log.Printf("timing %d runs of sbx exec DIR box -- true", cliExecs)
	for i := range 1 + cliExecs {
		ectx, cancel := context.WithTimeout(ctx, execLimit)
		var out bytes.Buffer
		cmd := b.command(ectx, &out, "exec", b.fix.Dir, s.name, "--", "true")
		start := time.Now()
		err := cmd.Run()
		d := time.Since(start)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			msg := fmt.Sprintf("%v: %s", err, strings.TrimSpace(lastLines(out.String(), 3)))
			b.log.Printf("sbx exec %d failed: %s", i+1, msg)
			res.execCLIFailed = append(res.execCLIFailed, msg)
			if len(res.execCLIFailed) > (1+cliExecs)/4 {
				return fmt.Errorf("%d runs of %s failed, the last with: %s", len(res.execCLIFailed), strings.Join(cmd.Args[1:], " "), msg)
			}
			continue
		}
		if i > 0 {
			res.execCLI = append(res.execCLI, d)
		}
	}
	return nil
}

// memSample is the host memory of one idle supervised sandbox.
type memSample struct {
	name       string
	supervisor memUsage
	qemu       memUsage // the whole QEMU process
	guestRAM   memUsage // its guest RAM mapping
	code       memUsage // its TCG translation buffer (part of qemu)
}

// beyondRAM is QEMU's memory less its guest RAM.
func (m memSample) beyondRAM() memUsage {
	return memUsage{Rss: m.qemu.Rss - m.guestRAM.Rss, Pss: m.qemu.Pss - m.guestRAM.Pss}
}

// overhead is what the sandbox costs the host beyond its guest RAM.
func (m memSample) overhead() memUsage {
	q := m.beyondRAM()
	return memUsage{Rss: m.supervisor.Rss + q.Rss, Pss: m.supervisor.Pss + q.Pss}
}

// measureMemory reads the memory of each sandbox's supervisor and QEMU.
func (b *bench) measureMemory(sbs []*sandbox) ([]memSample, error) {
	b.log.Printf("reading the memory of %d sandboxes", len(sbs))
	var out []memSample
	for _, s := range sbs {
		m := memSample{name: s.name}
		var err error
		if m.supervisor, err = readRollup(s.status.Pid); err != nil {
			return out, fmt.Errorf("sandbox %s's supervisor: %w", s.name, err)
		}
		if m.qemu, err = readRollup(s.status.QEMUPid); err != nil {
			return out, fmt.Errorf("sandbox %s's QEMU: %w", s.name, err)
		}
		ram, code, err := readQEMUMaps(s.status.QEMUPid, b.memory)
		if err != nil {
			return out, fmt.Errorf("sandbox %s's QEMU: %w", s.name, err)
		}
		m.guestRAM, m.code = ram.Usage, code
		out = append(out, m)
	}
	return out, nil
}

// cleanup stops every supervisor, waits for the QEMUs this run started
// to exit, kills any that did not, and removes the temporary
// directories. It is an error when a QEMU was left.
func (b *bench) cleanup() error {
	b.mu.Lock()
	sups := append([]*sandbox(nil), b.sups...)
	b.mu.Unlock()
	var errs []error
	if len(sups) > 0 {
		b.log.Printf("stopping %d supervised sandboxes", len(sups))
		ctx, cancel := context.WithTimeout(context.Background(), stopLimit)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, s := range sups {
			wg.Go(func() {
				if err := supervisor.Stop(ctx, s.dir); err != nil && !errors.Is(err, supervisor.ErrNotRunning) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		cancel()
	}

	ours := []string{b.base, b.work}
	var left []int
	if b.base != "" {
		// A supervisor answers a stop before it exits; give it, and
		// every QEMU, a moment.
		var supsLeft []*sandbox
		deadline := time.Now().Add(goneLimit)
		for {
			left, supsLeft = qemuProcesses(ours...), nil
			for _, s := range sups {
				if s.status != nil && alive(s.status.Pid) && cmdlineHas(s.status.Pid, b.base) {
					supsLeft = append(supsLeft, s)
				}
			}
			if len(left)+len(supsLeft) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, pid := range left {
			// Package qemu starts QEMU as the leader of its own
			// process group.
			syscall.Kill(-pid, syscall.SIGKILL)
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if len(left) > 0 {
			errs = append(errs, fmt.Errorf("QEMU processes %v were still running %v after every sandbox was stopped; killed them", left, goneLimit))
		}
		for _, s := range supsLeft {
			syscall.Kill(s.status.Pid, syscall.SIGKILL)
			errs = append(errs, fmt.Errorf("the supervisor of %s (pid %d) was still running %v after it was stopped; killed it", s.name, s.status.Pid, goneLimit))
		}
		if len(left) == 0 {
			os.RemoveAll(b.base)
		}
	}
	if b.removeWork != nil && len(left) == 0 {
		b.removeWork()
	}
	if len(errs) == 0 && b.started {
		b.log.Printf("every QEMU this run started has exited")
	}
	return errors.Join(errs...)
}

// cmdlineHas reports whether an argument of process pid contains s.
func cmdlineHas(pid int, s string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && s != "" && bytes.Contains(b, []byte(s))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func orNone(d time.Duration, f func(time.Duration) string) string {
	if d <= 0 {
		return "none"
	}
	return f(d)
}
