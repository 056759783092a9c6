package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/internal/atomicfile"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	ctlproto "github.com/sbx-dev/sbx/internal/proto/control"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/internal/snapshot"
	"github.com/sbx-dev/sbx/internal/supervisor/router"
)

// Names of the files in a supervisor's directory.
const (
	SpecFile    = "spec.json"       // what to run, written by Spawn
	StatusFile  = "status.json"     // the supervisor's state (Status)
	SocketFile  = "supervisor.sock" // the agent protocol, for guestconn.Dial
	ControlFile = "control.sock"    // control lines (package proto/control): "stop", "status", "reload"
	LogFile     = "supervisor.log"  // the detached process's output
)

// ErrNotRunning is the error of Dial and Stop when no supervisor serves
// the directory.
var ErrNotRunning = errors.New("supervisor: not running")

// Spec is what a supervisor runs: one sandbox, kept as JSON in its
// directory's spec.json (SpecFile). Its policy is the one enforced now:
// Reload records the new one there.
type Spec = sandbox.Spec

// State is where a supervisor is in its life.
type State string

// States of a supervisor.
const (
	StateStarting State = "starting" // booting the machine
	StateRunning  State = "running"  // serving clients
	StateStopping State = "stopping" // stopping the machine
	StateStopped  State = "stopped"  // done; the machine is gone
	StateFailed   State = "failed"   // the machine did not start, or ended on its own
)

// Status is what a supervisor records in its directory's status.json.
type Status struct {
	Name  string `json:"name"`
	State State  `json:"state"`
	// Pid is the supervisor's process id, QEMUPid the machine's.
	Pid     int `json:"pid"`
	QEMUPid int `json:"qemu_pid,omitempty"`
	// MachineDir is the running machine's private directory (its
	// console log, overlay disk and sockets).
	MachineDir string `json:"machine_dir,omitempty"`
	// Accel is the accelerator the machine runs under, and Note why a
	// faster one was not used.
	Accel string `json:"accel,omitempty"`
	Note  string `json:"note,omitempty"`
	// Started says how the machine started ("cold", "warm", "saved":
	// sandbox.Started), StartMillis how long the start took, and
	// StartWarning why a warm start was not made.
	Started      string `json:"started,omitempty"`
	StartMillis  int64  `json:"start_millis,omitempty"`
	StartWarning string `json:"start_warning,omitempty"`
	// Mounts is how the mounts reach the guest ("virtiofs" or "9p":
	// sandbox.Started), MountsNote why over 9P when virtio-fs could
	// not run on this host.
	Mounts     string `json:"mounts,omitempty"`
	MountsNote string `json:"mounts_note,omitempty"`
	// Error says why the supervisor failed or stopped with an error.
	Error string `json:"error,omitempty"`
	// Agent says why the guest agent of a running supervisor is not
	// healthy ("did not answer a ping within 10s"). Only
	// the answer to "status" on the control socket sets it, having
	// pinged the agent; it is never recorded in the status file.
	Agent string `json:"agent,omitempty"`
}

// Options configure Run.
type Options struct {
	// Dir is the supervisor's directory: its sockets, status file and the
	// machine's private directory go there. Unix socket paths are short,
	// so it must be too (about 60 bytes at most).
	Dir string
	// Spec is the sandbox to run.
	Spec Spec
	// Hypervisor runs the sandbox's machine (machine.Options.Hypervisor);
	// nil means QEMU, on what qemu.Probe finds.
	Hypervisor machine.Hypervisor
	// Logger receives the supervisor's progress; nil discards it.
	Logger *slog.Logger
	// Secrets holds the value of each secret Spec.Policy binds, by name.
	// Spawn hands them to the supervisor process through a pipe, never a
	// file.
	Secrets map[string][]byte
	// Snapshots is the directory of the machines saved for warm starts
	// (package snapshot); empty boots the machine cold.
	Snapshots string
	// MountTransport is how the mounts reach the guest
	// (sandbox.Options.MountTransport); empty chooses.
	MountTransport sandboxfs.Transport
}

// guestWait bounds how long Run tries to take over the agent port from
// the machine's own connection.
const guestWait = 30 * time.Second

// Run is the supervisor: it boots the sandbox's machine, serves a Router
// on Dir/supervisor.sock and control lines on Dir/control.sock, and keeps
// Dir/status.json up to date. It runs until ctx ends, a client asks it to
// stop (Stop), or the machine ends on its own; then it stops the machine,
// removes its sockets and returns. A machine that fails to start or ends on
// its own is an error, also recorded in the status file.
func Run(ctx context.Context, opts Options) (err error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir := opts.Dir
	if dir == "" {
		return errors.New("supervisor: no directory")
	}
	if err := secureDir(dir, 1, true); err != nil {
		return err
	}
	if running(dir) {
		return fmt.Errorf("supervisor: %s is already served by a running supervisor", dir)
	}
	sockPath, ctlPath := filepath.Join(dir, SocketFile), filepath.Join(dir, ControlFile)
	os.Remove(sockPath)
	os.Remove(ctlPath)

	st := Status{Name: opts.Spec.Name, State: StateStarting, Pid: os.Getpid()}
	var stMu sync.Mutex // st is read by the control socket's goroutines
	if err := writeStatus(dir, st); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			stMu.Lock()
			st.State, st.Error = StateFailed, err.Error()
			failed := st
			stMu.Unlock()
			writeStatus(dir, failed)
		}
	}()

	var snaps *snapshot.Cache
	if opts.Snapshots != "" {
		if snaps, err = snapshot.Open(opts.Snapshots); err != nil {
			return fmt.Errorf("supervisor: %w", err)
		}
	}
	sb, err := sandbox.Start(ctx, opts.Spec, sandbox.Options{
		Dir:            dir,
		Secrets:        opts.Secrets,
		AuditDir:       dir,
		Logger:         log,
		Hypervisor:     opts.Hypervisor,
		KeepConsole:    filepath.Join(dir, ConsoleFile),
		Snapshots:      snaps,
		MountTransport: opts.MountTransport,
	})
	if snaps != nil {
		// The machine keeps its memory mapped.
		snaps.Close()
	}
	if err != nil {
		return fmt.Errorf("supervisor: %w", err)
	}
	started := sb.Started()
	st.Started, st.StartMillis, st.StartWarning = started.How, started.Took.Milliseconds(), started.Warning
	st.Mounts, st.MountsNote = string(started.Mounts), started.MountsNote
	m := sb.Machine()
	// The machine made its directory inside dir with mode 0700; it holds
	// the agent's socket.
	if err := privateDir(m.Dir()); err != nil {
		return errors.Join(err, sb.Stop(context.Background()))
	}
	st.QEMUPid, st.Accel, st.Note, st.MachineDir = m.Pid(), string(m.Accel()), m.Host().Note, m.Dir()
	log.Info("machine started", "sandbox", opts.Spec.Name, "qemu", m.Pid(), "accel", m.Accel(), "boot", m.BootTime())

	var listeners []net.Listener
	var r *router.Router
	stopAll := func() error {
		for _, l := range listeners {
			l.Close()
		}
		if r != nil {
			r.Close()
		}
		err := sb.Stop(context.Background())
		os.Remove(sockPath)
		return err
	}
	r, err = takeOver(ctx, m, log)
	if err == nil {
		sb.ConfigureThrough(func(ctx context.Context, c agentproto.Configure) error { return configure(ctx, r, c) })
		var l, ctl net.Listener
		if l, err = listenPrivate(sockPath, log); err == nil {
			listeners = append(listeners, l)
			if ctl, err = listenPrivate(ctlPath, log); err == nil {
				listeners = append(listeners, ctl)
			}
		}
	}
	if err != nil {
		return errors.Join(fmt.Errorf("supervisor: %w", err), stopAll())
	}
	defer os.Remove(ctlPath)

	st.State = StateRunning
	if err := writeStatus(dir, st); err != nil {
		return errors.Join(err, stopAll())
	}
	go r.Serve(listeners[0])
	setState := func(state State) {
		stMu.Lock()
		st.State = state
		stMu.Unlock()
	}
	ctl := &control{l: listeners[1], stop: make(chan struct{}), status: func() Status {
		stMu.Lock()
		defer stMu.Unlock()
		return st
	}, ping: func(ctx context.Context) error {
		return pingGuest(ctx, r)
	}, reload: func(ctx context.Context, req reloadRequest) error {
		return reload(ctx, dir, sb, req, log)
	}}
	go ctl.serve()
	log.Info("serving", "socket", sockPath)

	leaseDone := make(chan struct{})
	defer close(leaseDone)
	var ended error
	select {
	case <-ctx.Done():
		log.Info("stopping", "why", ctx.Err())
	case why := <-watchLease(dir, leaseDone):
		log.Info("stopping", "why", "lease: "+why)
	case <-ctl.stop:
		log.Info("stopping", "why", "asked on the control socket")
	case <-m.Done():
		ended = errors.New("the machine exited on its own")
		log.Warn("the machine exited on its own: " + machineTails(m))
	case <-r.Done():
		// QEMU closes the agent's socket when it exits: say so when that
		// is why.
		select {
		case <-m.Done():
			ended = errors.New("the machine exited on its own")
			log.Warn("the machine exited on its own: " + machineTails(m))
		case <-time.After(2 * time.Second):
			ended = fmt.Errorf("the guest agent connection ended: %w", r.Err())
		}
	}
	setState(StateStopping)
	writeStatus(dir, ctl.status())
	stopErr := stopAll()
	err = errors.Join(ended, stopErr)
	if err != nil {
		err = fmt.Errorf("supervisor: sandbox %s: %w", opts.Spec.Name, err)
	} else {
		setState(StateStopped)
		if werr := writeStatus(dir, ctl.status()); werr != nil {
			err = werr
		}
	}
	ctl.finish(err)
	log.Info("stopped", "error", err)
	return err
}

// takeOver replaces the machine's own connection to the guest agent with
// a Router's. The agent serves one connection after another; it may still
// be ending the machine's when the router says hello, and then refuses it,
// so the router tries again for a while.
func takeOver(ctx context.Context, m *machine.Machine, log *slog.Logger) (*router.Router, error) {
	m.Client().Close()
	agent := filepath.Join(m.Dir(), machine.AgentSocket)
	ctx, cancel := context.WithTimeout(ctx, guestWait)
	defer cancel()
	for {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", agent)
		if err == nil {
			helloCtx, stop := context.WithTimeout(ctx, 5*time.Second)
			var r *router.Router
			r, err = router.New(helloCtx, conn, router.Options{Logger: log})
			stop()
			if err == nil {
				return r, nil
			}
		}
		log.Debug("taking over the agent port", "error", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connecting to the guest agent: %w", err)
		case <-m.Done():
			return nil, fmt.Errorf("the machine exited while the supervisor connected to its agent; %s", machineTails(m))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// control serves the control socket: one line per request, "stop" or
// "status". A stop is answered once the supervisor has stopped.
type control struct {
	l      net.Listener
	stop   chan struct{}
	status func() Status
	// ping checks that the guest agent answers; nil skips the check.
	ping   func(context.Context) error
	reload func(context.Context, reloadRequest) error

	mu      sync.Mutex
	once    sync.Once
	waiters []net.Conn
	done    bool
	err     error
}

func (c *control) serve() {
	for {
		conn, err := c.l.Accept()
		if err != nil {
			return
		}
		go c.handle(conn)
	}
}

func (c *control) handle(conn net.Conn) {
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	verb, err := ctlproto.ReadVerb(br)
	if err != nil {
		conn.Close()
		return
	}
	conn.SetReadDeadline(time.Time{})
	switch verb {
	case ctlproto.Reload:
		c.handleReload(conn, br)
	case ctlproto.Stop:
		c.mu.Lock()
		if c.done {
			c.mu.Unlock()
			answerStop(conn, c.err)
			return
		}
		c.waiters = append(c.waiters, conn)
		c.mu.Unlock()
		c.once.Do(func() { close(c.stop) })
	case ctlproto.Status:
		st := c.status()
		if st.State == StateRunning && c.ping != nil {
			ctx, cancel := context.WithTimeout(context.Background(), agentPingTimeout)
			if err := c.ping(ctx); errors.Is(err, context.DeadlineExceeded) {
				st.Agent = fmt.Sprintf("did not answer a ping within %v", agentPingTimeout)
			} else if err != nil {
				st.Agent = fmt.Sprintf("did not answer a ping: %v", err)
			}
			cancel()
		}
		b, _ := json.Marshal(st)
		ctlproto.Answer(conn, string(b))
		conn.Close()
	default:
		ctlproto.Refuse(conn, ctlproto.Unknown(verb))
		conn.Close()
	}
}

// agentPingTimeout bounds how long a "status" request waits for the
// guest agent's answer to a ping before it reports the agent unhealthy.
// An agent that serves answers in milliseconds, even in a guest whose
// vCPUs are busy under TCG; one that does not within this long is wedged
// (every later exec would wait forever) or gone.
const agentPingTimeout = 10 * time.Second

// pingGuest checks that the guest agent behind r answers a ping within
// ctx, as a client of r's would see it.
func pingGuest(ctx context.Context, r *router.Router) error {
	a, b, err := connPair()
	if err != nil {
		return err
	}
	go r.ServeConn(a)
	c, err := guestconn.DialContext(ctx, b)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Ping(ctx)
	return err
}

// finish answers every stop request with how the stop went and closes the
// control socket.
func (c *control) finish(err error) {
	c.mu.Lock()
	c.done, c.err = true, err
	waiters := c.waiters
	c.waiters = nil
	c.mu.Unlock()
	for _, conn := range waiters {
		answerStop(conn, err)
	}
	c.l.Close()
}

func answerStop(conn net.Conn, err error) {
	if err != nil {
		ctlproto.Refuse(conn, err)
	} else {
		ctlproto.Answer(conn, ctlproto.Stopped)
	}
	conn.Close()
}

// Stop asks the supervisor serving dir to stop its sandbox and waits
// until it has, or until ctx ends. With no supervisor running, the error
// is ErrNotRunning; a directory or supervisor that another user could
// control is refused as by Dial.
func Stop(ctx context.Context, dir string) error {
	return callControl(ctx, dir, "stopping", ctlproto.Request{Verb: ctlproto.Stop}, ctlproto.Stopped)
}

// callControl makes a request on the control socket of the supervisor
// serving dir (dialDir) and checks that the answer is want; doing names
// the request in errors ("stopping").
func callControl(ctx context.Context, dir, doing string, req ctlproto.Request, want string) error {
	conn, err := dialDir(ctx, dir, ControlFile)
	if err != nil {
		return err
	}
	defer conn.Close()
	answer, err := ctlproto.Call(ctx, conn, req)
	if err != nil {
		return fmt.Errorf("supervisor: %s %s: %w", doing, dir, err)
	}
	if answer != want {
		return fmt.Errorf("supervisor: %s %s: %s", doing, dir, answer)
	}
	return nil
}

// Dial connects to the supervisor serving dir and returns a client of the
// sandbox's guest agent. A directory or supervisor that another user could
// control is refused (*UnsafeError, *PeerError) before anything is sent.
func Dial(ctx context.Context, dir string) (*guestconn.Client, error) {
	conn, err := dialDir(ctx, dir, SocketFile)
	if err != nil {
		return nil, err
	}
	// A supervisor answers the hello at once (with the guest's, which it
	// keeps); one that does not is stuck, and waiting on it would hang.
	helloCtx, cancel := context.WithTimeout(ctx, dialHelloTimeout)
	defer cancel()
	c, err := guestconn.DialContext(helloCtx, conn)
	if err != nil {
		return nil, fmt.Errorf("supervisor: %s: %w", dir, err)
	}
	return c, nil
}

// dialHelloTimeout bounds Dial's wait for the supervisor's hello.
const dialHelloTimeout = 15 * time.Second

// dialDir connects to the socket name in the supervisor directory dir
// once dir has passed secureDir and the server runs as this user
// (dialVerified). With no supervisor there, the error is ErrNotRunning.
func dialDir(ctx context.Context, dir, name string) (net.Conn, error) {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", ErrNotRunning, dir)
	}
	if err := secureDir(dir, 1, false); err != nil {
		return nil, err
	}
	conn, err := dialVerified(ctx, filepath.Join(dir, name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w in %s", ErrNotRunning, dir)
		}
		var pe *PeerError
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, fmt.Errorf("supervisor: %s: %w", dir, err)
	}
	return conn, nil
}

// running reports whether a supervisor of this user answers on dir's
// control socket.
func running(dir string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := dialVerified(ctx, filepath.Join(dir, ControlFile))
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// ReadStatus reads the status file of the supervisor directory dir; one
// that is a symbolic link, or not this user's, is an *UnsafeError.
func ReadStatus(dir string) (*Status, error) {
	b, err := readPrivate(filepath.Join(dir, StatusFile))
	if err != nil {
		return nil, err
	}
	var st Status
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("supervisor: %s: %w", filepath.Join(dir, StatusFile), err)
	}
	return &st, nil
}

func writeStatus(dir string, st Status) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("supervisor: status: %w", err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, StatusFile), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("supervisor: status: %w", err)
	}
	return nil
}
