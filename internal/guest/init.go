package guest

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"time"

	"github.com/sbx-dev/sbx/internal/guest/execsrv"
	"github.com/sbx-dev/sbx/internal/guest/initsys"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
)

// Options are what Init works with.
type Options struct {
	// Root is the file-system root: "/" in the guest.
	Root string
	// Sys makes the system calls: initsys.Linux() in the guest.
	Sys initsys.Sys
	// Console receives the agent's lines: the kernel console, which
	// the kernel opened as PID 1's standard output.
	Console io.Writer
	// Start is when the agent started, for the ready line's timing;
	// zero means when Init was called.
	Start time.Time
	// Poll is how often waits look again; 0 means initsys's default.
	Poll time.Duration
	// Reap starts reaping orphaned processes while Init runs. PID 1
	// must; a test process must not, or it steals its own children.
	Reap bool
}

// Init boots the guest and runs the configured mode. It returns only
// when powering off failed (or, in tests, when Sys.PowerOff returns), with
// the error that ended the boot if there was one. Every failure, panics
// included, is printed as an error line before the machine powers off.
func Init(opts Options) (err error) {
	if opts.Start.IsZero() {
		opts.Start = time.Now()
	}
	console := &lockedWriter{w: opts.Console}
	b := &initsys.Boot{Root: opts.Root, Sys: opts.Sys, Console: console, Poll: opts.Poll}

	var once sync.Once
	shutdown := func(cause error) error {
		var perr error
		once.Do(func() {
			if cause != nil {
				console.WriteString(bootproto.ErrorLine(cause))
			}
			perr = b.PowerOff()
			if perr != nil {
				console.WriteString(bootproto.ErrorLine(perr))
			}
		})
		return perr
	}

	// PID 1 reaps every orphan; in serve mode the same reaper hands the
	// exec server the exit statuses of its processes.
	var reaper execsrv.Reaper
	if opts.Reap {
		var stop func()
		reaper, stop = startReaper()
		defer stop()
	}

	// The watchdog powers off when the boot overruns, and stops the
	// waits of the boot. Its deadline becomes the configured one once
	// the command line is read.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var dog watchdog
	defer dog.stop()
	arm := func(d time.Duration, what string) {
		dog.arm(d, func() {
			// Report the overrun before stopping the boot's waits, so
			// the error line names the deadline, not the interrupted
			// wait.
			shutdown(fmt.Errorf("boot did not finish within %v (%s)", d, what))
			cancel()
		})
	}
	arm(bootproto.DefaultBootTimeout, "the default boot timeout")

	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			if perr := shutdown(err); perr != nil {
				err = fmt.Errorf("%w; %w", err, perr)
			}
		}
	}()

	runErr := b.MountKernelFS()
	var cfg bootproto.Config
	if runErr == nil {
		cfg, runErr = b.ReadConfig()
	}
	if runErr == nil {
		arm(cfg.BootTimeout, bootproto.ParamBootTimeout)
		runErr = run(ctx, b, cfg, opts.Start, console)
	}
	if runErr == nil && cfg.Mode == bootproto.ModeServe {
		// Booted: the boot deadline no longer applies. The machine
		// runs until the host asks for a power-off.
		dog.stop()
		runErr = serve(context.Background(), b.Root, console, reaper, opts.Poll)
	}
	if perr := shutdown(runErr); perr != nil {
		if runErr != nil {
			return fmt.Errorf("%w; %w", runErr, perr)
		}
		return perr
	}
	return runErr
}

// watchdog runs a function when a deadline passes.
type watchdog struct {
	mu sync.Mutex
	t  *time.Timer
}

// arm replaces the deadline and the function.
func (w *watchdog) arm(d time.Duration, f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.t != nil {
		w.t.Stop()
	}
	w.t = time.AfterFunc(d, f)
}

func (w *watchdog) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.t != nil {
		w.t.Stop()
	}
}

// run finishes the boot and carries out cfg.Mode.
func run(ctx context.Context, b *initsys.Boot, cfg bootproto.Config, start time.Time, console *lockedWriter) error {
	modules, err := b.LoadModules()
	if err != nil {
		return err
	}
	if err := b.WaitDevice(ctx, cfg.Root, cfg.RootWait); err != nil {
		return err
	}
	if err := b.CheckFS(cfg.Root, cfg.RootFSType); err != nil {
		return err
	}
	if err := b.MountRoot(cfg); err != nil {
		return err
	}
	hostname := b.Hostname(cfg)
	if err := b.SwitchRoot(); err != nil {
		return err
	}
	if err := b.SetHostname(hostname); err != nil {
		return err
	}
	kernel, err := b.KernelRelease()
	if err != nil {
		return err
	}
	uptime, err := b.Uptime()
	if err != nil {
		return err
	}
	switch cfg.Mode {
	case bootproto.ModeReadyPowerOff, bootproto.ModeServe:
		ready := bootproto.Ready{
			Kernel:       kernel,
			Hostname:     hostname,
			Mode:         cfg.Mode,
			Root:         cfg.Root,
			Modules:      modules,
			UptimeMillis: uptime.Milliseconds(),
			AgentMillis:  time.Since(start).Milliseconds(),
		}
		if ctx.Err() != nil {
			return fmt.Errorf("boot stopped: %w", ctx.Err())
		}
		console.WriteString(ready.Line())
		return nil
	default:
		return fmt.Errorf("mode %q is not implemented", cfg.Mode)
	}
}

// lockedWriter serialises whole lines from the boot and the watchdog.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return len(p), nil
	}
	return l.w.Write(p)
}

func (l *lockedWriter) WriteString(s string) {
	l.Write([]byte(s))
}
