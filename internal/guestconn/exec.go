package guestconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/internal/termtext"
)

// Cmd is a process to run in the guest.
type Cmd struct {
	// Args is the command line; Args[0] is looked up in the process's
	// PATH when it holds no slash.
	Args []string
	// Env holds "KEY=value" entries over the guest's defaults (PATH,
	// HOME, USER, LOGNAME, SHELL, and TERM with a PTY). The host's
	// environment is never sent.
	Env []string
	// Dir is the working directory; empty means the user's home.
	Dir string
	// User is a guest user name or uid, or "uid:gid"; empty means the
	// agent's user.
	User string
	// Stdin, when set, is copied to the process until it returns
	// io.EOF, which closes the process's stdin (on a PTY, it types ^D).
	// A nil Stdin reads as empty. The copy stops when the process
	// exits, but a Read already blocked keeps its goroutine until it
	// returns.
	Stdin io.Reader
	// Stdout and Stderr receive the process's output; nil discards it.
	// With a PTY, all output goes to Stdout.
	Stdout io.Writer
	Stderr io.Writer
	// PTY, when set, runs the process on a pseudo-terminal.
	PTY *PTY
	// Started, when set, is called with the process once it runs, before
	// Start returns (and before Exec waits): a caller of Exec uses it to
	// resize or signal the process meanwhile.
	Started func(*Process)
}

// PTY is the size and type of a pseudo-terminal.
type PTY struct {
	Rows, Cols uint16
	Term       string // TERM; empty means agentproto.DefaultTerm
}

// ExitStatus is how a process ended.
type ExitStatus struct {
	// Code is the exit code, or -1 when a signal killed the process.
	Code int
	// Signal names the signal that killed the process ("SIGTERM").
	Signal     string
	CoreDumped bool
}

// Success reports whether the process exited with code 0.
func (s *ExitStatus) Success() bool { return s.Signal == "" && s.Code == 0 }

// ShellCode is the status as one exit code, the way shells report it:
// the process's own code, or 128 plus the number of the signal that
// killed it (Linux's numbers: the guest is Linux whatever the host is;
// 129 for a signal it does not know).
func (s *ExitStatus) ShellCode() int {
	if s.Signal == "" {
		return s.Code
	}
	if n, ok := linuxSignals[strings.TrimPrefix(s.Signal, "SIG")]; ok {
		return 128 + n
	}
	return 128 + 1
}

// linuxSignals are the numbers of the guest's signals by the names the
// agent reports.
var linuxSignals = map[string]int{
	"HUP": 1, "INT": 2, "QUIT": 3, "ILL": 4, "TRAP": 5, "ABRT": 6, "BUS": 7,
	"FPE": 8, "KILL": 9, "USR1": 10, "SEGV": 11, "USR2": 12, "PIPE": 13,
	"ALRM": 14, "TERM": 15, "STKFLT": 16, "CHLD": 17, "CONT": 18, "STOP": 19,
	"TSTP": 20, "TTIN": 21, "TTOU": 22, "URG": 23, "XCPU": 24, "XFSZ": 25,
	"VTALRM": 26, "PROF": 27, "WINCH": 28, "IO": 29, "PWR": 30, "SYS": 31,
}

// String describes the status; a signal's name, which the guest
// reports, has its control characters escaped (package termtext).
func (s *ExitStatus) String() string {
	if s.Signal != "" {
		sig := termtext.Line(s.Signal)
		if s.CoreDumped {
			return "killed by " + sig + " (core dumped)"
		}
		return "killed by " + sig
	}
	return "exit status " + strconv.Itoa(s.Code)
}

// Exit codes of a command the guest could not run, as shells and
// docker exec report them.
const (
	ExitNotExecutable = 126 // the command was found but could not be executed
	ExitNotFound      = 127 // the command was not found
)

// CommandError is the error of a command the guest could not run because
// it was not found (Code ExitNotFound) or could not be executed (Code
// ExitNotExecutable). Err is the guest's error, naming the command;
// errors.Is matches it against fs.ErrNotExist or fs.ErrPermission where
// its errno says so.
type CommandError struct {
	Code int
	Err  *agentproto.Error
}

func (e *CommandError) Error() string { return e.Err.Error() }
func (e *CommandError) Unwrap() error { return e.Err }

// Process is a process started in the guest.
type Process struct {
	c     *Client
	id    uint32
	args0 string
	ctx   context.Context

	stdin *agentproto.Credit
	out   [3]*agentproto.Inbox

	started chan struct{}
	pid     int

	once      sync.Once
	done      chan struct{}
	exit      *agentproto.Exit
	connErr   error
	stopCtx   func()
	consumers sync.WaitGroup

	mu      sync.Mutex
	copyErr error
}

var errExited = errors.New("the process has exited")

// Exec runs a process in the guest and waits for it. Its output has been
// written to Stdout and Stderr by the time it returns. When ctx ends
// first, the guest kills the process's group and Exec returns its status
// with ctx's error.
func (c *Client) Exec(ctx context.Context, cmd Cmd) (*ExitStatus, error) {
	p, err := c.Start(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return p.Wait()
}

// Start starts a process in the guest and returns once it runs. ctx
// covers the process's whole life: when it ends before the process, the
// guest kills the process group, and a guest that has not ended the
// session CancelGrace later loses the connection, so neither Start nor
// Wait outlives ctx by more than that. A process the guest cannot start
// (no such file, unknown user...) is an error here: a *CommandError
// when its command was not found or could not be executed.
func (c *Client) Start(ctx context.Context, cmd Cmd) (*Process, error) {
	if len(cmd.Args) == 0 {
		return nil, errors.New("guestconn: exec: no command")
	}
	if err := cmd.Check(); err != nil {
		return nil, fmt.Errorf("guestconn: exec %s: %w", cmd.Args[0], err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("guestconn: exec %s: %w", cmd.Args[0], err)
	}
	p := &Process{
		c:       c,
		args0:   cmd.Args[0],
		ctx:     ctx,
		started: make(chan struct{}),
		done:    make(chan struct{}),
	}
	req := &agentproto.Exec{Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir, User: cmd.User, Stdin: cmd.Stdin != nil}
	if cmd.PTY != nil {
		req.PTY = &agentproto.PTY{Rows: cmd.PTY.Rows, Cols: cmd.PTY.Cols, Term: cmd.PTY.Term}
	}
	if cmd.Stdin != nil {
		p.stdin = agentproto.NewCredit()
	}
	writers := map[agentproto.Channel]io.Writer{agentproto.ChanStdout: cmd.Stdout}
	if cmd.PTY == nil {
		writers[agentproto.ChanStderr] = cmd.Stderr
	}
	// Armed before the request is sent: sending it may block too.
	p.stopCtx = c.watch(ctx, p.done, "exec "+strconv.Quote(cmd.Args[0]), p.cancel)
	_, err := c.open(p, agentproto.TypeExec, req, func(id uint32) {
		p.id = id
		for ch := range writers {
			p.out[ch] = agentproto.NewInbox(c.grant(id, ch))
		}
	})
	if err != nil {
		p.fail(err)
		return nil, fmt.Errorf("guestconn: exec %s: %w", cmd.Args[0], err)
	}
	if ctx.Err() != nil {
		// ctx ended while the request was sent: cancel had no
		// session to name yet.
		go p.cancel()
	}
	for ch, w := range writers {
		if w == nil {
			w = io.Discard
		}
		in := p.out[ch]
		p.consumers.Go(func() {
			if _, err := in.WriteTo(w); err != nil && !errors.Is(err, ErrClosed) {
				in.Abort(err) // keep the guest flowing; the error is reported by Wait
				p.setCopyErr(fmt.Errorf("writing %s: %w", ch, err))
			}
		})
	}

	select {
	case <-p.started:
	case <-p.done:
		select {
		case <-p.started:
			// A quick command: it started and ended before this select
			// ran, which picks either ready case at random.
		default:
			if _, err := p.Wait(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("guestconn: exec %s: the guest ended the session before starting it", cmd.Args[0])
		}
	}
	if cmd.Stdin != nil {
		go func() {
			err := c.sendStream(context.Background(), p.id, p.stdin, cmd.Stdin)
			if err != nil && !errors.Is(err, errExited) && !errors.Is(err, ErrClosed) {
				p.setCopyErr(fmt.Errorf("reading stdin: %w", err))
				c.conn.WriteEOF(p.id, agentproto.ChanStdin)
			}
		}()
	}
	if cmd.Started != nil {
		cmd.Started(p)
	}
	return p, nil
}

func (p *Process) setCopyErr(err error) {
	p.mu.Lock()
	if p.copyErr == nil {
		p.copyErr = err
	}
	p.mu.Unlock()
}

// Pid returns the process's id in the guest.
func (p *Process) Pid() int { return p.pid }

// Signal sends a signal, by name ("SIGTERM", "TERM"), to the process's
// group in the guest.
func (p *Process) Signal(sig string) error {
	return p.send(agentproto.TypeSignal, &agentproto.Signal{Signal: sig})
}

// Resize changes the size of the process's terminal.
func (p *Process) Resize(rows, cols uint16) error {
	return p.send(agentproto.TypeResize, &agentproto.Resize{Rows: rows, Cols: cols})
}

func (p *Process) send(t agentproto.Type, m any) error {
	select {
	case <-p.done:
		return fmt.Errorf("guestconn: %s %s: %w", t, p.args0, errExited)
	default:
	}
	return p.c.conn.WriteJSON(t, p.id, m)
}

// cancel asks the guest to kill the process group, once the request
// that opened the session is on its way.
func (p *Process) cancel() {
	p.c.mu.Lock()
	id := p.id
	p.c.mu.Unlock()
	if id == 0 {
		return
	}
	select {
	case <-p.done:
	default:
		p.c.cancelStream(id)
	}
}

// Wait waits for the process to exit and for its output to be written.
// A process killed by a signal is not an error: its ExitStatus says so.
// The errors are: the connection ended, ctx ended (the status is returned
// too), or Stdout, Stderr or Stdin failed.
func (p *Process) Wait() (*ExitStatus, error) {
	<-p.done
	p.consumers.Wait()
	if p.stopCtx != nil {
		p.stopCtx()
	}
	if p.connErr != nil {
		if err := p.ctx.Err(); err != nil {
			// ctx ended first; the connection ended after it, maybe
			// because the guest ignored the cancel.
			return nil, fmt.Errorf("guestconn: exec %s: %w (%w)", p.args0, err, p.connErr)
		}
		return nil, fmt.Errorf("guestconn: exec %s: %w", p.args0, p.connErr)
	}
	st := &ExitStatus{Code: p.exit.Code, Signal: p.exit.Signal, CoreDumped: p.exit.CoreDumped}
	if e := p.exit.Error; e != nil {
		if e.Code == agentproto.CodeCanceled && p.ctx.Err() != nil {
			return st, fmt.Errorf("guestconn: exec %s: %w", p.args0, p.ctx.Err())
		}
		if c := p.exit.Code; c == ExitNotFound || c == ExitNotExecutable {
			return nil, &CommandError{Code: c, Err: e}
		}
		return nil, e
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.copyErr != nil {
		return st, fmt.Errorf("guestconn: exec %s: %w", p.args0, p.copyErr)
	}
	return st, nil
}

func (p *Process) finish(m *agentproto.Exit, err error) {
	p.once.Do(func() {
		p.exit, p.connErr = m, err
		for _, in := range p.out {
			if in != nil {
				in.CloseWrite(err)
			}
		}
		if p.stdin != nil {
			p.stdin.Close(errExited)
		}
		close(p.done)
		p.c.remove(p.id)
	})
}

func (p *Process) fail(err error) { p.finish(nil, err) }

func (p *Process) handle(f agentproto.Frame) error {
	switch f.Type {
	case agentproto.TypeStarted:
		var m agentproto.Started
		if err := agentproto.ParseJSON(f.Type, f.Payload, &m); err != nil {
			return err
		}
		select {
		case <-p.started:
			return errors.New("second started frame")
		default:
		}
		p.pid = m.Pid
		close(p.started)
	case agentproto.TypeData:
		ch, data, err := agentproto.ParseData(f.Payload)
		if err != nil {
			return err
		}
		if ch == agentproto.ChanStdin || p.out[ch] == nil {
			return fmt.Errorf("data on %s", ch)
		}
		return p.out[ch].Push(data)
	case agentproto.TypeWindow:
		ch, n, err := agentproto.ParseWindow(f.Payload)
		if err != nil {
			return err
		}
		if ch == agentproto.ChanStdin && p.stdin != nil {
			return p.stdin.Add(n)
		}
	case agentproto.TypeExit:
		var m agentproto.Exit
		if err := agentproto.ParseJSON(f.Type, f.Payload, &m); err != nil {
			return err
		}
		p.finish(&m, nil)
	}
	return nil
}
