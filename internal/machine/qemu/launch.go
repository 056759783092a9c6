//go:build unix

package qemu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/internal/machine/qemu/qmp"
	"github.com/sbx-dev/sbx/internal/machine/vm"
)

// DefaultLaunchTimeout bounds how long Launch waits for QEMU's QMP socket
// when ctx has no deadline.
const DefaultLaunchTimeout = 30 * time.Second

// Process is a running QEMU started by Launch.
type Process struct {
	// QMP is the connection to QEMU's monitor, negotiated and ready.
	QMP *qmp.Client

	argv    []string
	cmd     *exec.Cmd
	sockets []string // the sockets QEMU listens on, removed once it exits
	log     *tail    // QEMU's output when spec.QEMULog is empty
	logPath string

	fsSlots   int  // VMSpec.FSSlots
	sharedRAM bool // VMSpec.Memory with Shared

	done    chan struct{} // closed once QEMU has exited and been reaped
	waitErr error         // set before done is closed
}

// Launch runs QEMU for spec on host: it builds the argument vector with
// Command, removes stale sockets at the paths QEMU is to listen on, starts
// the emulator directly (no shell) in a process group of its own, with a
// minimal environment rather than this process's (Environment), waits
// for its QMP socket and connects. ctx bounds the start only: the QEMU
// it returns runs until it exits or Kill is called, whatever becomes of
// ctx. When QEMU exits before its monitor is up, the error carries its
// last message.
func Launch(ctx context.Context, spec VMSpec, host Host) (*Process, error) {
	argv, err := Command(spec, host)
	if err != nil {
		return nil, err
	}
	p := &Process{argv: argv, done: make(chan struct{}), logPath: spec.QEMULog,
		fsSlots: spec.FSSlots, sharedRAM: spec.Memory != nil && spec.Memory.Shared}
	p.sockets = append(p.sockets, spec.QMPSocket)
	if spec.AgentSocket != "" {
		p.sockets = append(p.sockets, spec.AgentSocket)
	}
	for _, path := range spec.Ports {
		p.sockets = append(p.sockets, path)
	}
	for _, s := range p.sockets {
		if err := removeSocket(s); err != nil {
			return nil, fmt.Errorf("VM %q: %w", spec.Name, err)
		}
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = Environment(os.Environ())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if spec.Memory != nil && spec.Memory.File != nil {
		// Descriptor MemoryFD in QEMU, which Command's mem-path names.
		cmd.ExtraFiles = []*os.File{spec.Memory.File}
	}
	if spec.RootBacking != nil {
		// Descriptor vm.BackingFD (a nil entry before it is closed).
		cmd.ExtraFiles = append(make([]*os.File, vm.BackingFD-3), spec.RootBacking)
		if spec.Memory != nil && spec.Memory.File != nil {
			cmd.ExtraFiles[MemoryFD-3] = spec.Memory.File
		}
	}
	var logFile *os.File
	if spec.QEMULog != "" {
		logFile, err = os.OpenFile(spec.QEMULog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("VM %q: QEMU log: %w", spec.Name, err)
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
	} else {
		p.log = &tail{max: 8 << 10}
		cmd.Stdout, cmd.Stderr = p.log, p.log
	}
	err = cmd.Start()
	if logFile != nil {
		logFile.Close() // the child has its own copy
	}
	if err != nil {
		return nil, fmt.Errorf("VM %q: starting %s: %w", spec.Name, argv[0], err)
	}
	p.cmd = cmd
	go p.reap()

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultLaunchTimeout)
		defer cancel()
	}
	c, err := p.connect(ctx, spec.QMPSocket)
	if err != nil {
		p.Kill()
		return nil, fmt.Errorf("VM %q: %w", spec.Name, err)
	}
	p.QMP = c
	return p, nil
}

// connect waits for QEMU's QMP socket and negotiates with it.
func (p *Process) connect(ctx context.Context, path string) (*qmp.Client, error) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			c, err := qmp.Dial(ctx, path)
			if err == nil {
				return c, nil
			}
			if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
				// QEMU makes its QMP socket before it loads the
				// kernel and may still fail and exit; then its own
				// message says more than the broken connection.
				select {
				case <-p.done:
					return nil, fmt.Errorf("QEMU exited while starting: %s", p.failure())
				case <-time.After(2 * time.Second):
					return nil, err
				}
			}
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("QEMU exited while starting: %s", p.failure())
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for QEMU's QMP socket %s: %w", path, ctx.Err())
		case <-tick.C:
		}
	}
}

// reap waits for QEMU to exit, then removes the sockets it listened on
// (QEMU leaves them behind when killed).
func (p *Process) reap() {
	err := p.cmd.Wait()
	for _, s := range p.sockets {
		removeSocket(s)
	}
	p.waitErr = err
	close(p.done)
}

// failure describes how QEMU ended, with its last line of output.
func (p *Process) failure() string {
	var out string
	if p.log != nil {
		out = p.log.String()
	} else if b, err := readTail(p.logPath, 8<<10); err == nil {
		out = string(b)
	}
	return qemuExit(p.waitErr, out)
}

// Argv returns the argument vector QEMU was started with.
func (p *Process) Argv() []string { return slices.Clone(p.argv) }

// Pid returns QEMU's process id, which is also its process group's.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done returns a channel closed once QEMU has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits until QEMU exits or ctx ends. It returns nil when QEMU exited
// with status 0 (a guest power-off or a QMP "quit"), and an error with
// QEMU's last message otherwise.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if p.QMP != nil {
		p.QMP.Close()
	}
	if p.waitErr == nil {
		return nil
	}
	return fmt.Errorf("QEMU: %s", p.failure())
}

// Kill ends QEMU at once: SIGKILL to its whole process group. It returns
// once QEMU has been reaped and its sockets removed. Killing a QEMU that
// has already exited does nothing.
func (p *Process) Kill() error {
	select {
	case <-p.done:
	default:
		if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("killing QEMU (process group %d): %w", p.cmd.Process.Pid, err)
		}
		<-p.done
	}
	if p.QMP != nil {
		p.QMP.Close()
	}
	return nil
}

// removeSocket removes a unix socket left at path. Anything else there is
// left alone and reported, so that a wrong path never deletes a file.
func removeSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// qemuExit describes how QEMU ended: its last message (warnings only when
// it printed nothing else) and its exit status.
func qemuExit(waitErr error, out string) string {
	var last, lastWarning string
	for l := range strings.Lines(out) {
		switch l = strings.TrimSpace(l); {
		case l == "":
		case strings.Contains(l, "warning:"):
			lastWarning = l
		default:
			last = l
		}
	}
	if last == "" {
		last = lastWarning
	}
	status := "exit status 0"
	if waitErr != nil {
		status = waitErr.Error()
	}
	if last == "" {
		return status
	}
	return last + " (" + status + ")"
}

// readTail reads the last max bytes of a file.
func readTail(path string, limit int64) ([]byte, error) {
	if path == "" {
		return nil, errors.New("no log")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(fi.Size()-limit, 0)
	return io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
