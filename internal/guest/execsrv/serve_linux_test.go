package execsrv_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/socketpair"

	"github.com/sbx-dev/sbx/internal/guest/execsrv"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

// serve runs Serve on one end of a socket pair and dials the other.
func serve(t testing.TB, opts execsrv.Options) *guestconn.Client {
	t.Helper()
	host, guest := socketpair.New(t)
	done := make(chan error, 1)
	go func() { done <- execsrv.Serve(context.Background(), guest, opts) }()
	c, err := guestconn.Dial(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after the host closed the connection")
		}
	})
	return c
}

func run(t *testing.T, c *guestconn.Client, cmd guestconn.Cmd) (string, string, *guestconn.ExitStatus) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	st, err := c.Exec(context.Background(), cmd)
	if err != nil {
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	return stdout.String(), stderr.String(), st
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

func TestHello(t *testing.T) {
	c := serve(t, execsrv.Options{Software: "sbx-guest test"})
	h := c.Guest()
	if h.Version != agentproto.Version || h.Software != "sbx-guest test" || !h.Has(agentproto.CapPTY) || !h.Has(agentproto.CapFile) {
		t.Errorf("guest hello = %+v", h)
	}
	if _, err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestExitCodes(t *testing.T) {
	c := serve(t, execsrv.Options{})
	for _, code := range []int{0, 3, 255} {
		stdout, stderr, st := run(t, c, guestconn.Cmd{Args: sh(fmt.Sprintf("echo out; echo err >&2; exit %d", code))})
		if st.Code != code || st.Signal != "" || st.Success() != (code == 0) {
			t.Errorf("exit %d: status %v", code, st)
		}
		if stdout != "out\n" || stderr != "err\n" {
			t.Errorf("exit %d: stdout %q, stderr %q", code, stdout, stderr)
		}
	}
}

func TestSignal(t *testing.T) {
	c := serve(t, execsrv.Options{})
	p, err := c.Start(context.Background(), guestconn.Cmd{Args: []string{"sleep", "100"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal("SIGTERM"); err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if st.Signal != "SIGTERM" || st.Code != -1 || st.Success() {
		t.Errorf("status %v, want killed by SIGTERM", st)
	}
	// The short name works too, and reaches the whole process group.
	p, err = c.Start(context.Background(), guestconn.Cmd{Args: sh("trap 'echo got INT; exit 7' INT; sleep 100 & wait")})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the shell set its trap
	p.Signal("INT")
	if st, _ := p.Wait(); st == nil || st.Code != 7 {
		t.Errorf("status %v, want exit 7 from the trap", st)
	}
}

func TestStdin(t *testing.T) {
	c := serve(t, execsrv.Options{})
	data := make([]byte, 5<<20+17)
	rand.NewChaCha8([32]byte{1}).Read(data)
	h := sha256.New()
	st, err := c.Exec(context.Background(), guestconn.Cmd{Args: []string{"cat"}, Stdin: bytes.NewReader(data), Stdout: h})
	if err != nil || !st.Success() {
		t.Fatal(st, err)
	}
	if got, want := h.Sum(nil), sha256.Sum256(data); !bytes.Equal(got, want[:]) {
		t.Error("cat's output differs from its input")
	}
	// Without stdin the process reads an empty file.
	stdout, _, _ := run(t, c, guestconn.Cmd{Args: sh("wc -c")})
	if strings.TrimSpace(stdout) != "0" {
		t.Errorf("without stdin, wc -c = %q", stdout)
	}
}

// seqOutput is what `seq 1 n` prints.
func seqOutput(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// slowHash hashes what it is given, slowly: a consumer that cannot keep up.
type slowHash struct {
	h     io.Writer
	n     int64
	delay time.Duration
}

func (s *slowHash) Write(p []byte) (int, error) {
	s.n += int64(len(p))
	time.Sleep(s.delay)
	return s.h.Write(p)
}

// TestLargeStdoutMemoryBounded streams more than 50 MB of stdout to a
// consumer slower than the producer and checks the bytes, and that
// neither end buffered them: the heap stays far below the stream's size.
func TestLargeStdoutMemoryBounded(t *testing.T) {
	c := serve(t, execsrv.Options{})
	const n = 7_000_000
	want := sha256.Sum256(seqOutput(n))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)

	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
		}
	}()
	h := sha256.New()
	out := &slowHash{h: h, delay: 200 * time.Microsecond}
	st, err := c.Exec(context.Background(), guestconn.Cmd{Args: []string{"seq", "1", strconv.Itoa(n)}, Stdout: out})
	close(stop)
	<-sampled
	if err != nil || !st.Success() {
		t.Fatal(st, err)
	}
	if out.n < 50<<20 {
		t.Fatalf("only %d bytes streamed", out.n)
	}
	if !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatal("stdout differs from seq's output")
	}
	// The stream is ~55 MB; with flow control both ends hold a window
	// (256 KiB) plus chunk buffers. Allow generous slack for the test's
	// own allocations (the expected output was freed before).
	growth := int64(peak.Load()) - int64(base.HeapAlloc)
	t.Logf("%d bytes streamed, heap grew by at most %d bytes", out.n, growth)
	if growth > 16<<20 {
		t.Errorf("heap grew by %d bytes while streaming %d: output is being buffered", growth, out.n)
	}
}

// rawGuest speaks the protocol by hand to a Serve, to watch the frames.
// One goroutine reads them into a channel.
type rawGuest struct {
	t      *testing.T
	conn   *agentproto.Conn
	frameC chan agentproto.Frame
}

func dialRaw(t *testing.T, opts execsrv.Options) *rawGuest {
	host, guest := socketpair.New(t)
	done := make(chan error, 1)
	go func() { done <- execsrv.Serve(context.Background(), guest, opts) }()
	t.Cleanup(func() {
		host.Close()
		<-done
	})
	r := &rawGuest{t: t, conn: agentproto.NewConn(host), frameC: make(chan agentproto.Frame, 1024)}
	go func() {
		defer close(r.frameC)
		for {
			f, err := r.conn.ReadFrame()
			if err != nil {
				return
			}
			r.frameC <- f
		}
	}()
	if err := r.conn.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Versions: []int{1}}); err != nil {
		t.Fatal(err)
	}
	if f := r.read(); f.Type != agentproto.TypeHello {
		t.Fatalf("answer to hello: %v", f.Type)
	}
	return r
}

func (r *rawGuest) read() agentproto.Frame {
	r.t.Helper()
	select {
	case f, ok := <-r.frameC:
		if !ok {
			r.t.Fatal("the guest closed the connection")
		}
		return f
	case <-time.After(10 * time.Second):
		r.t.Fatal("no frame from the guest in 10s")
	}
	return agentproto.Frame{}
}

// frames reads frames until quiet has passed without one, or the
// connection ends.
func (r *rawGuest) frames(quiet time.Duration) []agentproto.Frame {
	var out []agentproto.Frame
	for {
		select {
		case f, ok := <-r.frameC:
			if !ok {
				return out
			}
			out = append(out, f)
		case <-time.After(quiet):
			return out
		}
	}
}

// TestFlowControl drives the server by hand: a process whose output the
// host never grants credit for gets exactly one window through and then
// blocks, while the connection keeps serving pings and other sessions.
// Granting credit lets it finish.
func TestFlowControl(t *testing.T) {
	r := dialRaw(t, execsrv.Options{})
	const size = 4 << 20
	r.conn.WriteJSON(agentproto.TypeExec, 1, &agentproto.Exec{Args: []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}})

	stdout := map[uint32]int{}
	exited := map[uint32]*agentproto.Exit{}
	pongs := 0
	take := func(f agentproto.Frame) {
		switch f.Type {
		case agentproto.TypeData:
			_, data, _ := agentproto.ParseData(f.Payload)
			stdout[f.Stream] += len(data)
		case agentproto.TypeExit:
			var m agentproto.Exit
			agentproto.ParseJSON(f.Type, f.Payload, &m)
			exited[f.Stream] = &m
		case agentproto.TypePong:
			pongs++
		}
	}
	// Read until the window is used up and nothing more comes.
	deadline := time.Now().Add(10 * time.Second)
	for stdout[1] < agentproto.InitialWindow && time.Now().Before(deadline) {
		take(r.read())
	}
	// A second session and a ping still go through.
	r.conn.WriteJSON(agentproto.TypeExec, 2, &agentproto.Exec{Args: []string{"echo", "hi"}})
	r.conn.WriteFrame(agentproto.TypePing, 0, []byte("p"))
	for (exited[2] == nil || pongs == 0) && time.Now().Before(deadline) {
		take(r.read())
	}
	if exited[2] == nil || exited[2].Code != 0 || stdout[2] != 3 || pongs != 1 {
		t.Fatalf("while session 1 is stalled: session 2 exit %+v with %d bytes, %d pongs", exited[2], stdout[2], pongs)
	}
	// Session 1 stays stalled at exactly one window.
	for _, f := range r.frames(300 * time.Millisecond) {
		take(f)
	}
	if stdout[1] != agentproto.InitialWindow || exited[1] != nil {
		t.Fatalf("without credit the server sent %d bytes (window %d), exit %+v", stdout[1], agentproto.InitialWindow, exited[1])
	}
	t.Logf("stalled at %d bytes", stdout[1])
}

// TestFlowControlResumes grants credit as data arrives and gets the whole
// stream and the exit.
func TestFlowControlResumes(t *testing.T) {
	r := dialRaw(t, execsrv.Options{})
	const size = 4 << 20
	r.conn.WriteJSON(agentproto.TypeExec, 1, &agentproto.Exec{Args: []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}})
	got := 0
	for {
		f := r.read()
		if f.Type == agentproto.TypeData {
			_, data, _ := agentproto.ParseData(f.Payload)
			got += len(data)
			r.conn.WriteWindow(1, agentproto.ChanStdout, uint32(len(data)))
		}
		if f.Type == agentproto.TypeExit {
			var m agentproto.Exit
			agentproto.ParseJSON(f.Type, f.Payload, &m)
			if m.Code != 0 || got != size {
				t.Fatalf("exit %+v after %d bytes, want 0 after %d", m, got, size)
			}
			return
		}
	}
}

func TestProtocolErrors(t *testing.T) {
	// Overrunning the credit ends the connection with an error frame.
	r := dialRaw(t, execsrv.Options{})
	r.conn.WriteJSON(agentproto.TypeExec, 1, &agentproto.Exec{Args: []string{"sleep", "100"}, Stdin: true})
	if f := r.read(); f.Type != agentproto.TypeStarted {
		t.Fatalf("got %v, want started", f.Type)
	}
	// sleep never reads: the pipe fills, then the window, then the
	// guest must notice the overrun. Window frames are ignored.
	for range 8 << 20 / agentproto.MaxData {
		if err := r.conn.WriteData(1, agentproto.ChanStdin, make([]byte, agentproto.MaxData)); err != nil {
			break
		}
	}
	var last agentproto.Frame
	for _, f := range r.frames(2 * time.Second) {
		last = f
	}
	var e agentproto.Error
	agentproto.ParseJSON(last.Type, last.Payload, &e)
	if last.Type != agentproto.TypeError || e.Code != agentproto.CodeProtocol || !strings.Contains(e.Message, "credit") {
		t.Errorf("after a credit overrun: last frame %v %+v", last.Type, e)
	}

	// A version the guest does not speak is refused at hello.
	host, guest := socketpair.New(t)
	done := make(chan error, 1)
	go func() { done <- execsrv.Serve(context.Background(), guest, execsrv.Options{}) }()
	conn := agentproto.NewConn(host)
	conn.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Versions: []int{99}})
	f, err := conn.ReadFrame()
	if err != nil || f.Type != agentproto.TypeError {
		t.Fatalf("hello with version 99: %v %v", f.Type, err)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "no common protocol version") || errors.Is(err, execsrv.ErrTakenOver) {
		t.Errorf("Serve = %v", err)
	}
	host.Close()

	// A second hello on a connection means a new host client took the
	// port over: the connection ends with ErrTakenOver, an expected end.
	host, guest = socketpair.New(t)
	go func() { done <- execsrv.Serve(context.Background(), guest, execsrv.Options{}) }()
	conn = agentproto.NewConn(host)
	for i := range 2 {
		conn.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Versions: []int{1}})
		want := agentproto.TypeHello
		if i == 1 {
			want = agentproto.TypeError
		}
		if f, err := conn.ReadFrame(); err != nil || f.Type != want {
			t.Fatalf("hello %d: %v %v, want %v", i+1, f.Type, err, want)
		}
	}
	if err := <-done; !errors.Is(err, execsrv.ErrTakenOver) {
		t.Errorf("Serve after a second hello = %v, want ErrTakenOver", err)
	}
	host.Close()
}

func TestConcurrentExecs(t *testing.T) {
	c := serve(t, execsrv.Options{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			// Each session both reads stdin and writes interleaved
			// stdout and stderr of its own.
			in := bytes.Repeat([]byte(fmt.Sprintf("session %d\n", i)), 20000)
			var stdout, stderr bytes.Buffer
			st, err := c.Exec(context.Background(), guestconn.Cmd{
				Args:   sh(fmt.Sprintf("for j in 1 2 3; do seq %d 20000 >&2; done; cat", i)),
				Stdin:  bytes.NewReader(in),
				Stdout: &stdout,
				Stderr: &stderr,
			})
			if err != nil || !st.Success() {
				t.Errorf("session %d: %v %v", i, st, err)
				return
			}
			if !bytes.Equal(stdout.Bytes(), in) {
				t.Errorf("session %d: stdout is not its stdin (%d bytes, want %d)", i, stdout.Len(), len(in))
			}
			part := append([]byte("0\n"), seqOutput(20000)...)
			if i > 0 {
				part = part[bytes.Index(part, []byte("\n"+strconv.Itoa(i)+"\n"))+1:]
			}
			if !bytes.Equal(stderr.Bytes(), bytes.Repeat(part, 3)) {
				t.Errorf("session %d: stderr differs", i)
			}
		})
	}
	wg.Wait()
}

func TestMaxSessions(t *testing.T) {
	c := serve(t, execsrv.Options{MaxSessions: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := c.Start(ctx, guestconn.Cmd{Args: []string{"sleep", "100"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(context.Background(), guestconn.Cmd{Args: []string{"true"}})
	var pe *agentproto.Error
	if !errors.As(err, &pe) || pe.Code != agentproto.CodeBusy {
		t.Errorf("second exec: %v, want busy", err)
	}
	cancel()
	p.Wait()
	// The slot is free again once the first session ended.
	for range 50 {
		if _, err = c.Exec(context.Background(), guestconn.Cmd{Args: []string{"true"}}); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("exec after the first ended: %v", err)
	}
}

func writePasswd(t *testing.T, root string) {
	t.Helper()
	etc := filepath.Join(root, "etc")
	os.MkdirAll(etc, 0o755)
	// t.TempDir's parent is private to root; the user's home must be
	// reachable by the user.
	home, err := os.MkdirTemp("", "sbx-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	os.Chmod(home, 0o777)
	passwd := "root:x:0:0:root:/root:/bin/sh\n" +
		"agent:x:1234:1234:Agent:" + home + ":/bin/sh\n"
	group := "root:x:0:\nagent:x:1234:\nextra:x:2345:someone,agent\n"
	if err := os.WriteFile(filepath.Join(etc, "passwd"), []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "group"), []byte(group), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRunAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing user needs root")
	}
	root := t.TempDir()
	writePasswd(t, root)
	c := serve(t, execsrv.Options{Root: root})
	for _, tc := range []struct{ user, script, want string }{
		{"agent", "id -u; id -g; id -G", "1234\n1234\n1234 2345\n"},
		{"1234", "id -u", "1234\n"},
		{"1234:2345", "id -u; id -g", "1234\n2345\n"},
		{"agent:extra", "id -g", "2345\n"},
		{"4321", "id -u; id -g; echo $HOME; pwd", "4321\n4321\n/\n/\n"},
		{"agent", "echo $USER $LOGNAME $SHELL", "agent agent /bin/sh\n"},
	} {
		stdout, stderr, st := run(t, c, guestconn.Cmd{Args: sh(tc.script), User: tc.user})
		if stdout != tc.want || !st.Success() {
			t.Errorf("as %s, %q: %q (stderr %q, %v), want %q", tc.user, tc.script, stdout, stderr, st, tc.want)
		}
	}
	// The default directory is the user's home.
	stdout, _, _ := run(t, c, guestconn.Cmd{Args: []string{"pwd"}, User: "agent"})
	var home string
	fmt.Sscan(stdout, &home)
	if !strings.HasPrefix(home, os.TempDir()) {
		t.Errorf("agent's working directory %q is not its home", home)
	}
	_, err := c.Exec(context.Background(), guestconn.Cmd{Args: []string{"true"}, User: "nobody-here"})
	var pe *agentproto.Error
	if !errors.As(err, &pe) || pe.Code != agentproto.CodeNoUser || !strings.Contains(pe.Message, "nobody-here") {
		t.Errorf("unknown user: %v", err)
	}
}

func TestEnvAndDir(t *testing.T) {
	t.Setenv("SBX_AGENT_SECRET", "must-not-leak")
	c := serve(t, execsrv.Options{Root: t.TempDir()})
	dir := t.TempDir()
	stdout, _, _ := run(t, c, guestconn.Cmd{
		Args: sh(`pwd; echo "$FOO|$PATH|$HOME|${SBX_AGENT_SECRET-unset}|${TERM-unset}"`),
		Env:  []string{"FOO=bar", "HOME=/home/x"},
		Dir:  dir,
	})
	want := dir + "\nbar|" + execsrv.DefaultPath + "|/home/x|unset|unset\n"
	if stdout != want {
		t.Errorf("got %q, want %q", stdout, want)
	}
	// A missing directory or command is an error naming it.
	_, err := c.Exec(context.Background(), guestconn.Cmd{Args: []string{"true"}, Dir: "/no/such/dir"})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "/no/such/dir") {
		t.Errorf("missing dir: %v", err)
	}
	_, err = c.Exec(context.Background(), guestconn.Cmd{Args: []string{"no-such-command-x"}})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "no-such-command-x") {
		t.Errorf("missing command: %v", err)
	}
	// PATH comes from the request.
	bin := t.TempDir()
	os.WriteFile(filepath.Join(bin, "hello-x"), []byte("#!/bin/sh\necho from path\n"), 0o755)
	stdout, _, _ = run(t, c, guestconn.Cmd{Args: []string{"hello-x"}, Env: []string{"PATH=" + bin + ":/bin:/usr/bin"}})
	if stdout != "from path\n" {
		t.Errorf("command from the request's PATH: %q", stdout)
	}
}

func TestPTY(t *testing.T) {
	c := serve(t, execsrv.Options{})
	stdout, _, st := run(t, c, guestconn.Cmd{Args: sh("tty; stty size; echo $TERM; echo err >&2"), PTY: &guestconn.PTY{Rows: 24, Cols: 80}})
	if !st.Success() {
		t.Fatal(st)
	}
	lines := strings.Split(strings.ReplaceAll(stdout, "\r\n", "\n"), "\n")
	if len(lines) < 4 || !regexp.MustCompile(`^/dev/pts/\d+$`).MatchString(lines[0]) || lines[1] != "24 80" || lines[2] != agentproto.DefaultTerm || lines[3] != "err" {
		t.Fatalf("output on a PTY: %q", stdout)
	}

	// Resize while it runs; the process sees the new size.
	pr, pw := io.Pipe()
	var out syncBuffer
	p, err := c.Start(context.Background(), guestconn.Cmd{
		Args:   sh("stty size; read x; stty size; read y; echo got $y"),
		PTY:    &guestconn.PTY{Rows: 24, Cols: 80, Term: "vt100"},
		Stdin:  pr,
		Stdout: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, "24 80")
	if err := p.Resize(40, 120); err != nil {
		t.Fatal(err)
	}
	pw.Write([]byte("\n"))
	waitFor(t, &out, "40 120")
	// Closing stdin is end-of-file on the terminal, even mid-line.
	pw.Write([]byte("partial"))
	pw.Close()
	st, err = p.Wait()
	if err != nil || !st.Success() {
		t.Fatal(st, err)
	}
	if !strings.Contains(out.String(), "got partial") {
		t.Errorf("output %q lacks the partial line", out.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, b *syncBuffer, s string) {
	t.Helper()
	for range 500 {
		if strings.Contains(b.String(), s) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("output %q never showed %q", b.String(), s)
}

// groupAlive reports the processes of a process group still alive (not
// zombies), from /proc.
func groupAlive(pgid int) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestCancelKillsProcessGroup(t *testing.T) {
	c := serve(t, execsrv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	p, err := c.Start(ctx, guestconn.Cmd{Args: sh("sleep 100 & echo started; sleep 100"), Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, "started")
	if alive := groupAlive(p.Pid()); len(alive) < 2 {
		t.Fatalf("before cancel, group %d has %v", p.Pid(), alive)
	}
	cancel()
	st, err := p.Wait()
	if !errors.Is(err, context.Canceled) || st == nil || st.Signal != "SIGKILL" {
		t.Fatalf("after cancel: %v, %v", st, err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", p.Pid())); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("process %d is still there (or a zombie): %v", p.Pid(), err)
	}
	for range 100 {
		if len(groupAlive(p.Pid())) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("group %d still has %v", p.Pid(), groupAlive(p.Pid()))
}

func TestCloseKillsProcesses(t *testing.T) {
	host, guest := socketpair.New(t)
	done := make(chan error, 1)
	go func() { done <- execsrv.Serve(context.Background(), guest, execsrv.Options{}) }()
	c, err := guestconn.Dial(host)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Start(context.Background(), guestconn.Cmd{Args: []string{"sleep", "100"}})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", p.Pid())); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("process %d survived the connection", p.Pid())
	}
	if _, err := p.Wait(); !errors.Is(err, guestconn.ErrClosed) {
		t.Errorf("Wait after Close: %v", err)
	}
	if _, err := c.Exec(context.Background(), guestconn.Cmd{Args: []string{"true"}}); !errors.Is(err, guestconn.ErrClosed) {
		t.Errorf("Exec after Close: %v", err)
	}
}

func TestBackgroundOutputDoesNotHoldExit(t *testing.T) {
	c := serve(t, execsrv.Options{WaitDelay: 200 * time.Millisecond})
	start := time.Now()
	stdout, _, st := run(t, c, guestconn.Cmd{Args: sh("sleep 300 & echo hi")})
	if stdout != "hi\n" || !st.Success() {
		t.Errorf("got %q, %v", stdout, st)
	}
	if d := time.Since(start); d > 120*time.Second {
		t.Errorf("exec took %v: the background process held it", d)
	}
}

func TestPutGet(t *testing.T) {
	root := t.TempDir()
	c := serve(t, execsrv.Options{Root: root})
	ctx := context.Background()
	os.Mkdir(filepath.Join(root, "work"), 0o755)
	data := make([]byte, 3<<20+5)
	rand.NewChaCha8([32]byte{2}).Read(data)

	var owner *guestconn.Owner
	if os.Geteuid() == 0 {
		owner = &guestconn.Owner{UID: 1234, GID: 2345}
	}
	if err := c.Put(ctx, bytes.NewReader(data), "/work/blob", 0o640, owner); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(root, "work", "blob"))
	if err != nil || fi.Mode() != 0o640 || fi.Size() != int64(len(data)) {
		t.Fatalf("on disk: %v %v", fi, err)
	}
	var got bytes.Buffer
	info, err := c.Get(ctx, "/work/blob", &got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) || info.Size != int64(len(data)) || info.Mode != 0o640 {
		t.Errorf("got %d bytes, info %+v", got.Len(), info)
	}
	if owner != nil && (info.UID != 1234 || info.GID != 2345) {
		t.Errorf("owner %d:%d, want 1234:2345", info.UID, info.GID)
	}

	// Replacing keeps no temporary files; set-id bits survive.
	if err := c.Put(ctx, strings.NewReader("#!/bin/sh\n"), "/work/blob", 0o4755|fs.ModeSetuid, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, strings.NewReader("#!/bin/sh\n"), "/work/tool", fs.ModeSetuid|0o755, nil); err != nil {
		t.Fatal(err)
	}
	info, err = c.Get(ctx, "/work/tool", io.Discard)
	if err != nil || info.Mode != fs.ModeSetuid|0o755 || info.Size != 10 {
		t.Errorf("setuid file: %+v %v", info, err)
	}
	ents, _ := os.ReadDir(filepath.Join(root, "work"))
	if len(ents) != 2 {
		t.Errorf("work holds %v", ents)
	}
	// An empty file.
	if err := c.Put(ctx, strings.NewReader(""), "/work/empty", 0o600, nil); err != nil {
		t.Fatal(err)
	}
	if info, err := c.Get(ctx, "/work/empty", io.Discard); err != nil || info.Size != 0 || info.Mode != 0o600 {
		t.Errorf("empty file: %+v %v", info, err)
	}

	// Errors name the guest path, not the root it is under.
	_, err = c.Get(ctx, "/work/missing", io.Discard)
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != "get /work/missing: no such file or directory" {
		t.Errorf("missing file: %v", err)
	}
	err = c.Put(ctx, strings.NewReader("x"), "/nodir/file", 0o644, nil)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "/nodir/file") || strings.Contains(err.Error(), root) {
		t.Errorf("put into a missing directory: %v", err)
	}
	if _, err := c.Get(ctx, "/work", io.Discard); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("get of a directory: %v", err)
	}
	if _, err := c.Get(ctx, "relative", io.Discard); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("relative path: %v", err)
	}
	// The connection survives all of it.
	if _, err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("disk on fire")
	}
	n := min(len(p), f.n)
	f.n -= n
	return n, nil
}

func TestPutFailureLeavesDestination(t *testing.T) {
	root := t.TempDir()
	c := serve(t, execsrv.Options{Root: root})
	dest := filepath.Join(root, "file")
	os.WriteFile(dest, []byte("original"), 0o644)
	err := c.Put(context.Background(), &failingReader{n: 1 << 20}, "/file", 0o644, nil)
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("put from a failing reader: %v", err)
	}
	for range 100 {
		ents, _ := os.ReadDir(root)
		if len(ents) == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b, _ := os.ReadFile(dest); string(b) != "original" {
		t.Errorf("destination now holds %q", b)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 1 {
		t.Errorf("root holds %v after a failed put", ents)
	}
}

func TestEmptyCommand(t *testing.T) {
	r := dialRaw(t, execsrv.Options{})
	r.conn.WriteJSON(agentproto.TypeExec, 1, &agentproto.Exec{})
	f := r.read()
	var m agentproto.Exit
	agentproto.ParseJSON(f.Type, f.Payload, &m)
	if f.Type != agentproto.TypeExit || m.Error == nil || !strings.Contains(m.Error.Message, "no command") {
		t.Errorf("exec of nothing: %v %+v", f.Type, m)
	}
}

// TestCommandNotRunnable checks the exit codes shells give a command that
// cannot be run: 127 when it is not found, 126 when it is found but cannot
// be executed, with the guest's error naming the command.
func TestCommandNotRunnable(t *testing.T) {
	c := serve(t, execsrv.Options{})
	dir := t.TempDir()
	for name, content := range map[string]string{
		"plain":      "not executable\n",
		"noshebang":  "\x7fELF junk that is no executable format",
		"badinterp":  "#!/no/such/interpreter\n",
		"executable": "#!/bin/sh\nexit 0\n",
	} {
		mode := os.FileMode(0o755)
		if name == "plain" {
			mode = 0o644
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args     []string
		code     int
		is       error // what errors.Is matches, or nil
		names    string
		inPathOf string
	}{
		{args: []string{"no-such-command-x"}, code: guestconn.ExitNotFound, is: fs.ErrNotExist, names: "no-such-command-x"},
		{args: []string{filepath.Join(dir, "missing")}, code: guestconn.ExitNotFound, is: fs.ErrNotExist, names: "missing"},
		{args: []string{"./missing"}, code: guestconn.ExitNotFound, is: fs.ErrNotExist, names: "./missing", inPathOf: dir},
		{args: []string{filepath.Join(dir, "plain")}, code: guestconn.ExitNotExecutable, is: fs.ErrPermission, names: "plain"},
		{args: []string{dir}, code: guestconn.ExitNotExecutable, is: fs.ErrPermission, names: dir},
		{args: []string{filepath.Join(dir, "noshebang")}, code: guestconn.ExitNotExecutable, names: "noshebang"},
		{args: []string{filepath.Join(dir, "badinterp")}, code: guestconn.ExitNotExecutable, names: "badinterp"},
	} {
		_, err := c.Exec(context.Background(), guestconn.Cmd{Args: tc.args, Dir: tc.inPathOf})
		var ce *guestconn.CommandError
		if !errors.As(err, &ce) || ce.Code != tc.code || !strings.Contains(err.Error(), tc.names) {
			t.Errorf("%v: error %v (%T), want a CommandError with code %d naming %s", tc.args, err, err, tc.code, tc.names)
			continue
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%v: %v is not %v", tc.args, err, tc.is)
		}
	}
	// Other failures to start are not a command's.
	_, err := c.Exec(context.Background(), guestconn.Cmd{Args: []string{filepath.Join(dir, "executable")}, Dir: "/no/such/dir"})
	var ce *guestconn.CommandError
	if err == nil || errors.As(err, &ce) {
		t.Errorf("a missing working directory: %v (%T), want an error that is no CommandError", err, err)
	}
	if _, _, st := run(t, c, guestconn.Cmd{Args: []string{filepath.Join(dir, "executable")}}); st.Code != 0 {
		t.Errorf("the executable script: %v", st)
	}
}

// TestHostOutOfOrder: a host whose frames break the session's grammar
// (agentproto.Session) is refused with the grammar's words, in an error
// frame that ends the connection.
func TestHostOutOfOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		open    func(c *agentproto.Conn)
		frame   func(c *agentproto.Conn)
		refusal string
	}{
		{"stdin nobody asked for",
			func(c *agentproto.Conn) {
				c.WriteJSON(agentproto.TypeExec, 1, &agentproto.Exec{Args: []string{"sleep", "100"}})
			},
			func(c *agentproto.Conn) { c.WriteEOF(1, agentproto.ChanStdin) },
			"stream 1: eof on stdin, where the session takes no data"},
		{"stdin after its eof",
			func(c *agentproto.Conn) {
				c.WriteJSON(agentproto.TypeExec, 1, &agentproto.Exec{Args: []string{"sleep", "100"}, Stdin: true})
			},
			func(c *agentproto.Conn) {
				c.WriteEOF(1, agentproto.ChanStdin)
				c.WriteData(1, agentproto.ChanStdin, []byte("x"))
			},
			"stream 1: data on stdin after its eof"},
		{"stderr window on a terminal",
			func(c *agentproto.Conn) {
				c.WriteJSON(agentproto.TypeExec, 1, &agentproto.Exec{Args: []string{"sleep", "100"}, PTY: &agentproto.PTY{}})
			},
			func(c *agentproto.Conn) { c.WriteWindow(1, agentproto.ChanStderr, 1) },
			"stream 1: window on stderr, where the session sends nothing"},
		{"signal to a file put",
			func(c *agentproto.Conn) {
				// A path the put can create under the test's root: the
				// session then waits for data, so the signal meets it
				// open (a put that failed at once would have ended).
				c.WriteJSON(agentproto.TypeFilePut, 1, &agentproto.FilePut{Path: "/never"})
			},
			func(c *agentproto.Conn) { c.WriteJSON(agentproto.TypeSignal, 1, &agentproto.Signal{Signal: "SIGTERM"}) },
			"stream 1: signal frame on a file-put session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, execsrv.Options{Root: t.TempDir()})
			tc.open(r.conn)
			if tc.name != "signal to a file put" {
				if f := r.read(); f.Type != agentproto.TypeStarted {
					t.Fatalf("got %v, want started", f.Type)
				}
			}
			tc.frame(r.conn)
			var last agentproto.Frame
			for _, f := range r.frames(2 * time.Second) {
				last = f
			}
			var e agentproto.Error
			agentproto.ParseJSON(last.Type, last.Payload, &e)
			if last.Type != agentproto.TypeError || e.Code != agentproto.CodeProtocol || e.Message != tc.refusal {
				t.Errorf("last frame %v %+v; want a protocol error %q", last.Type, e, tc.refusal)
			}
		})
	}
}
