package execsrv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/internal/hostenv"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"golang.org/x/sys/unix"
)

// DefaultPath is PATH for processes whose request sets none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// execSession runs one process.
type execSession struct {
	s      *server
	id     uint32
	req    agentproto.Exec
	ctx    context.Context
	cancel context.CancelFunc

	stdin *agentproto.Inbox // nil without Exec.Stdin
	out   [3]*agentproto.Credit

	mu       sync.Mutex
	pid      int // 0 until started
	done     bool
	canceled bool
	pty      *os.File // the master side, with a PTY

	exited atomic.Bool
}

func newExecSession(s *server, id uint32, req agentproto.Exec) *execSession {
	e := &execSession{s: s, id: id, req: req}
	e.ctx, e.cancel = context.WithCancel(s.ctx)
	if req.Stdin {
		e.stdin = agentproto.NewInbox(s.grant(id, agentproto.ChanStdin))
	}
	e.out[agentproto.ChanStdout] = agentproto.NewCredit()
	e.out[agentproto.ChanStderr] = agentproto.NewCredit()
	return e
}

func (e *execSession) handle(f agentproto.Frame) error {
	switch f.Type {
	case agentproto.TypeData:
		ch, data, err := agentproto.ParseData(f.Payload)
		if err != nil || ch != agentproto.ChanStdin || e.stdin == nil {
			return protocolf("stream %d: data frame not on the stdin the exec asked for", f.Stream)
		}
		if err := e.stdin.Push(data); err != nil {
			return protocolf("stream %d: %v", f.Stream, err)
		}
	case agentproto.TypeEOF:
		ch, err := agentproto.ParseEOF(f.Payload)
		if err != nil || ch != agentproto.ChanStdin {
			return protocolf("stream %d: eof frame not on stdin", f.Stream)
		}
		if e.stdin != nil {
			e.stdin.CloseWrite(nil)
		}
	case agentproto.TypeWindow:
		ch, n, err := agentproto.ParseWindow(f.Payload)
		if err != nil || ch == agentproto.ChanStdin {
			return protocolf("stream %d: window frame not on stdout or stderr", f.Stream)
		}
		if err := e.out[ch].Add(n); err != nil {
			return protocolf("stream %d: %v", f.Stream, err)
		}
	case agentproto.TypeSignal:
		var m agentproto.Signal
		if err := agentproto.ParseJSON(f.Type, f.Payload, &m); err != nil {
			return protocolf("stream %d: %v", f.Stream, err)
		}
		sig := unix.SignalNum(m.Signal)
		if sig == 0 {
			sig = unix.SignalNum("SIG" + m.Signal)
		}
		if sig == 0 {
			e.s.log.Warn("unknown signal", "stream", e.id, "signal", m.Signal)
			return nil
		}
		e.kill(sig)
	case agentproto.TypeResize:
		var m agentproto.Resize
		if err := agentproto.ParseJSON(f.Type, f.Payload, &m); err != nil {
			return protocolf("stream %d: %v", f.Stream, err)
		}
		e.mu.Lock()
		pty := e.pty
		e.mu.Unlock()
		if pty != nil {
			if err := setWinsize(pty, m.Rows, m.Cols); err != nil {
				e.s.log.Warn("resizing the terminal", "stream", e.id, "error", err)
			}
		}
	case agentproto.TypeCancel:
		e.mu.Lock()
		e.canceled = true
		e.mu.Unlock()
		e.kill(syscall.SIGKILL)
	}
	return nil
}

// kill signals the process group while the process runs. The group id is
// the process's pid (Setsid), which the kernel does not reuse while any
// member of the group lives.
func (e *execSession) kill(sig syscall.Signal) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pid == 0 || e.done {
		return
	}
	syscall.Kill(-e.pid, sig)
}

func (e *execSession) exit(m *agentproto.Exit) {
	if err := e.s.conn.WriteJSON(agentproto.TypeExit, e.id, m); err != nil {
		e.s.log.Debug("reporting an exit", "stream", e.id, "error", err)
	}
}

// fail ends a session whose process could not be started. A command
// that was not found exits 127 and one that could not be executed 126,
// as shells report them; other failures have code -1.
func (e *execSession) fail(err error) {
	e.s.log.Info("exec failed", "stream", e.id, "error", err)
	code := -1
	var ce *commandError
	if errors.As(err, &ce) {
		code = ce.code
	}
	e.exit(&agentproto.Exit{Code: code, Error: errorOf(err)})
}

// Exit codes of a command that cannot be run, as shells and docker exec
// report them.
const (
	codeNotExecutable = 126 // found, but not executable
	codeNotFound      = 127 // not found
)

// commandError is a command that cannot be run: code is codeNotFound or
// codeNotExecutable.
type commandError struct {
	code int
	err  error
}

func (c *commandError) Error() string { return c.err.Error() }
func (c *commandError) Unwrap() error { return c.err }

// startError classifies the error of starting path (relative to dir when
// it is not absolute): a file that is not there is not found; one that is
// there but whose execution fails for want of permission, of a known
// format or of its interpreter is not executable.
func startError(err error, path, dir string) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err
	}
	switch errno {
	case syscall.ENOENT:
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		if _, serr := os.Stat(path); errors.Is(serr, fs.ErrNotExist) {
			return &commandError{codeNotFound, err}
		}
		// The file is there: its interpreter is not.
		return &commandError{codeNotExecutable, err}
	case syscall.EACCES, syscall.ENOEXEC, syscall.EISDIR, syscall.ETXTBSY:
		return &commandError{codeNotExecutable, err}
	}
	return err
}

func (e *execSession) run() {
	defer e.cancel()
	defer func() {
		if e.stdin != nil {
			e.stdin.Abort(errors.New("the process has exited"))
		}
	}()
	cmd, closeAfterStart, closeAfterExit, err := e.command()
	defer closeAll(closeAfterExit)
	if err != nil {
		closeAll(closeAfterStart)
		e.fail(err)
		return
	}
	status, err := e.s.opts.Reaper.Start(func() (int, error) {
		// The lock keeps Cancel from slipping between the start and
		// the pid being known.
		e.mu.Lock()
		defer e.mu.Unlock()
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		e.pid = cmd.Process.Pid
		return e.pid, nil
	})
	closeAll(closeAfterStart)
	if err != nil {
		who := ""
		if e.req.User != "" {
			who = " as " + e.req.User
		}
		e.fail(startError(fmt.Errorf("exec %s in %s%s: %w", e.req.Args[0], cmd.Dir, who, unwrapExec(err)), cmd.Path, cmd.Dir))
		return
	}
	defer cmd.Process.Release()
	e.s.log.Debug("exec started", "stream", e.id, "pid", e.pid, "command", e.req.Args[0])
	e.s.conn.WriteJSON(agentproto.TypeStarted, e.id, &agentproto.Started{Pid: e.pid})
	e.mu.Lock()
	if e.canceled {
		syscall.Kill(-e.pid, syscall.SIGKILL)
	}
	e.mu.Unlock()

	var pumps sync.WaitGroup
	var outputs []*os.File
	if e.req.PTY != nil {
		outputs = append(outputs, e.pty)
		pumps.Go(func() { e.pump(e.pty, agentproto.ChanStdout) })
	} else {
		outs := closeAfterExit[len(closeAfterExit)-2:]
		outputs = outs
		pumps.Go(func() { e.pump(outs[0], agentproto.ChanStdout) })
		pumps.Go(func() { e.pump(outs[1], agentproto.ChanStderr) })
	}
	if e.stdin != nil {
		w := closeAfterExit[0]
		go e.feed(w)
	}

	var ws syscall.WaitStatus
	select {
	case ws = <-status:
	case <-e.ctx.Done():
		// The connection is ending.
		e.kill(syscall.SIGKILL)
		ws = <-status
	}
	e.mu.Lock()
	e.done = true
	e.mu.Unlock()
	// Output still in flight is sent; output that stays silent for
	// WaitDelay belongs to a background process and is cut.
	e.exited.Store(true)
	for _, f := range outputs {
		f.SetReadDeadline(time.Now().Add(e.s.opts.WaitDelay))
	}
	pumps.Wait()

	m := &agentproto.Exit{}
	switch {
	case ws.Exited():
		m.Code = ws.ExitStatus()
	case ws.Signaled():
		m.Code = -1
		m.Signal = unix.SignalName(ws.Signal())
		m.CoreDumped = ws.CoreDump()
	}
	e.mu.Lock()
	canceled := e.canceled
	e.mu.Unlock()
	if canceled {
		m.Error = &agentproto.Error{Code: agentproto.CodeCanceled, Message: "canceled by the host"}
	}
	e.s.log.Debug("exec exited", "stream", e.id, "pid", e.pid, "code", m.Code, "signal", m.Signal)
	e.exit(m)
}

// pump sends what the process writes to f on a channel, as the host's
// credit allows: while there is none, it does not read, and the process
// blocks on a full pipe instead of the agent buffering.
func (e *execSession) pump(f *os.File, ch agentproto.Channel) {
	credit := e.out[ch]
	buf := make([]byte, agentproto.MaxData)
	for {
		n, err := credit.Wait(e.ctx)
		if err != nil {
			return
		}
		if e.exited.Load() {
			f.SetReadDeadline(time.Now().Add(e.s.opts.WaitDelay))
		}
		m, rerr := f.Read(buf[:min(n, len(buf))])
		if m > 0 {
			credit.Spend(m)
			if err := e.s.conn.WriteData(e.id, ch, buf[:m]); err != nil {
				return
			}
		}
		if rerr != nil {
			// io.EOF, EIO from a PTY whose terminal side closed, a
			// deadline after exit.
			return
		}
	}
}

// feed copies the host's stdin to the process.
func (e *execSession) feed(w *os.File) {
	if e.req.PTY == nil {
		e.stdin.WriteTo(w)
		w.Close()
		return
	}
	// A terminal has no end of input: the line discipline turns ^D
	// into one, at the start of a line. Another ^D ends a partial line.
	var last byte = '\n'
	_, err := e.stdin.WriteTo(writerFunc(func(p []byte) (int, error) {
		n, err := w.Write(p)
		if n > 0 {
			last = p[n-1]
		}
		return n, err
	}))
	if err == nil {
		eof := []byte{4}
		if last != '\n' {
			eof = []byte{4, 4}
		}
		w.Write(eof)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func closeAll(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// command prepares the process. closeAfterStart are the child's ends of
// its stdio, which the agent closes once the child holds them.
// closeAfterExit are the agent's ends: [stdin writer, ...], and, without
// a PTY, the stdout and stderr readers last.
func (e *execSession) command() (cmd *exec.Cmd, closeAfterStart, closeAfterExit []*os.File, err error) {
	req := e.req
	if len(req.Args) == 0 || req.Args[0] == "" {
		return nil, nil, nil, &agentproto.Error{Code: agentproto.CodeProtocol, Message: "exec: no command"}
	}
	spec := req.User
	own := spec == ""
	if own {
		spec = strconv.Itoa(os.Geteuid())
	}
	u, err := e.s.opts.Users.Lookup(spec)
	if err != nil {
		pe := errorOf(err)
		if errors.Is(err, ErrUnknownUser) {
			pe.Code = agentproto.CodeNoUser
		}
		return nil, nil, nil, pe
	}
	var defaults []string
	if e.s.opts.Configurer != nil {
		defaults = e.s.opts.Configurer.Env()
	}
	env := environ(u, defaults, req)
	path, err := lookPath(req.Args[0], hostenv.Get(env, "PATH"))
	if err != nil {
		return nil, nil, nil, err
	}
	dir := req.Dir
	if dir == "" {
		dir = "/"
		if fi, err := os.Stat(u.Home); err == nil && fi.IsDir() {
			dir = u.Home
		}
	}
	// The child's chdir failure would come back as the exec's; check
	// the directory first for a clearer message.
	if fi, err := os.Stat(dir); err != nil {
		return nil, nil, nil, fmt.Errorf("chdir %s: %w", dir, unwrapExec(err))
	} else if !fi.IsDir() {
		return nil, nil, nil, fmt.Errorf("chdir %s: %w", dir, syscall.ENOTDIR)
	}
	cmd = &exec.Cmd{
		Path:        path,
		Args:        req.Args,
		Env:         env,
		Dir:         dir,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if !own {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
	}
	defer func() {
		if err != nil {
			closeAll(closeAfterStart)
			closeAll(closeAfterExit)
		}
	}()

	if req.PTY != nil {
		master, slave, err := openPTY()
		if err != nil {
			return nil, nil, nil, err
		}
		closeAfterStart = append(closeAfterStart, slave)
		closeAfterExit = append(closeAfterExit, master)
		if err := setWinsize(master, req.PTY.Rows, req.PTY.Cols); err != nil {
			return nil, closeAfterStart, closeAfterExit, err
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr.Setctty = true
		cmd.SysProcAttr.Ctty = 0
		e.mu.Lock()
		e.pty = master
		e.mu.Unlock()
		return cmd, closeAfterStart, closeAfterExit, nil
	}

	if req.Stdin {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, closeAfterStart, closeAfterExit, err
		}
		closeAfterStart = append(closeAfterStart, r)
		closeAfterExit = append(closeAfterExit, w)
		cmd.Stdin = r
	} else {
		null, err := os.Open(os.DevNull)
		if err != nil {
			return nil, closeAfterStart, closeAfterExit, err
		}
		closeAfterStart = append(closeAfterStart, null)
		closeAfterExit = append(closeAfterExit, nil)
		cmd.Stdin = null
	}
	for _, dst := range []*io.Writer{&cmd.Stdout, &cmd.Stderr} {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, closeAfterStart, closeAfterExit, err
		}
		closeAfterStart = append(closeAfterStart, w)
		closeAfterExit = append(closeAfterExit, r)
		*dst = w
	}
	return cmd, closeAfterStart, closeAfterExit, nil
}

// environ builds the process environment: the defaults for the user, then
// the configured defaults, then the request's entries, later ones
// winning.
func environ(u User, defaults []string, req agentproto.Exec) []string {
	env := []string{"PATH=" + DefaultPath, "HOME=" + u.Home}
	if u.Name != "" {
		env = append(env, "USER="+u.Name, "LOGNAME="+u.Name)
	}
	if u.Shell != "" {
		env = append(env, "SHELL="+u.Shell)
	}
	if req.PTY != nil {
		term := req.PTY.Term
		if term == "" {
			term = agentproto.DefaultTerm
		}
		env = append(env, "TERM="+term)
	}
	env = append(env, defaults...)
	env = append(env, req.Env...)
	return hostenv.Merge(env)
}

// lookPath finds an executable in the process's PATH (not the agent's).
func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &commandError{codeNotFound, &agentproto.Error{Code: "ENOENT", Message: fmt.Sprintf("exec %s: executable file not found in PATH %s", name, path)}}
}

// unwrapExec drops the wrapping of os and os/exec, which name the path
// again, keeping the system error.
func unwrapExec(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
