package router

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"github.com/sbx-dev/sbx/internal/procstat"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/socketpair"

	"github.com/sbx-dev/sbx/internal/guest/execsrv"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

// fixture is a router between a real execsrv.Serve, over a socket pair,
// and a unix socket that clients dial.
type fixture struct {
	t      *testing.T
	router *Router
	sock   string
	root   string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	host, guest := socketpair.New(t)
	root := t.TempDir()
	served := make(chan error, 1)
	go func() {
		served <- execsrv.Serve(context.Background(), guest, execsrv.Options{Root: root, Software: "sbx-guest test"})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := New(ctx, host, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Unix socket paths are short; t.TempDir's may not be.
	dir, err := os.MkdirTemp("", "sup")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	serving := make(chan error, 1)
	go func() { serving <- r.Serve(l) }()
	t.Cleanup(func() {
		r.Close()
		if err := <-serving; !errors.Is(err, ErrClosed) {
			t.Errorf("Serve = %v, want ErrClosed", err)
		}
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("execsrv.Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("execsrv.Serve did not return after the router closed")
		}
	})
	return &fixture{t: t, router: r, sock: sock, root: root}
}

// dial connects a guestconn client to the router; rawConn is its socket.
func (f *fixture) dial() (*guestconn.Client, net.Conn) {
	f.t.Helper()
	conn, err := net.Dial("unix", f.sock)
	if err != nil {
		f.t.Fatal(err)
	}
	c, err := guestconn.Dial(conn)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	return c, conn
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

func TestHelloAndPing(t *testing.T) {
	f := newFixture(t)
	c, _ := f.dial()
	h := c.Guest()
	if h.Software != "sbx-guest test" || h.Version != agentproto.Version || !h.Has(agentproto.CapExec) || !h.Has(agentproto.CapFile) {
		t.Errorf("client sees hello %+v, want the guest's", h)
	}
	if h.Software != f.router.Guest().Software {
		t.Errorf("router's guest hello %+v", f.router.Guest())
	}
	for range 3 {
		if _, err := c.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	c2, _ := f.dial()
	var wg sync.WaitGroup
	for _, cl := range []*guestconn.Client{c, c2, c, c2} {
		wg.Go(func() {
			if _, err := cl.Ping(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// TestConcurrentClients runs execs from three clients at once, several
// per client, each echoing its own random stdin on stdout and a marker on
// stderr, and checks every byte and exit code.
func TestConcurrentClients(t *testing.T) {
	f := newFixture(t)
	const clients, perClient = 3, 4
	var wg sync.WaitGroup
	for i := range clients {
		c, _ := f.dial()
		for j := range perClient {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(i), uint64(j)))
				in := make([]byte, 300_000+rng.IntN(400_000))
				for k := range in {
					in[k] = byte(rng.Uint32())
				}
				code := i*perClient + j
				var stdout, stderr bytes.Buffer
				st, err := c.Exec(context.Background(), guestconn.Cmd{
					Args:   sh(fmt.Sprintf("cat; echo client %d exec %d >&2; exit %d", i, j, code)),
					Stdin:  bytes.NewReader(in),
					Stdout: &stdout, Stderr: &stderr,
				})
				if err != nil {
					t.Errorf("client %d exec %d: %v", i, j, err)
					return
				}
				if st.Code != code {
					t.Errorf("client %d exec %d: status %v, want exit %d", i, j, st, code)
				}
				if !bytes.Equal(stdout.Bytes(), in) {
					t.Errorf("client %d exec %d: stdout is %d bytes differing from the %d sent", i, j, stdout.Len(), len(in))
				}
				if want := fmt.Sprintf("client %d exec %d\n", i, j); stderr.String() != want {
					t.Errorf("client %d exec %d: stderr %q, want %q", i, j, stderr.String(), want)
				}
			})
		}
		// Each client also moves a file both ways.
		wg.Go(func() {
			content := bytes.Repeat([]byte(fmt.Sprintf("file of client %d\n", i)), 20_000)
			dest := filepath.Join("/", fmt.Sprintf("f%d", i))
			if err := c.Put(context.Background(), bytes.NewReader(content), dest, 0o640, nil); err != nil {
				t.Errorf("client %d put: %v", i, err)
				return
			}
			var got bytes.Buffer
			fi, err := c.Get(context.Background(), dest, &got)
			if err != nil {
				t.Errorf("client %d get: %v", i, err)
				return
			}
			if !bytes.Equal(got.Bytes(), content) || fi.Size != int64(len(content)) || fi.Mode.Perm() != 0o640 {
				t.Errorf("client %d: got %d bytes, info %+v; want the %d put", i, got.Len(), fi, len(content))
			}
		})
	}
	wg.Wait()
	if n := f.router.Clients(); n != clients {
		t.Errorf("router counts %d clients, want %d", n, clients)
	}
}

// slowWriter hashes what it is given, pausing now and then so that the
// reader is slower than the guest's writer.
type slowWriter struct {
	h     io.Writer
	n     int
	delay time.Duration
}

func (w *slowWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	if w.n%(1<<20) < len(p) {
		time.Sleep(w.delay)
	}
	return w.h.Write(p)
}

// TestLargeStreamFlowControl streams 20 MB through the router both ways,
// stdin to cat and its stdout back to a slow client, and checks the bytes, and that the router never queued more for
// the client than the credit the client granted.
func TestLargeStreamFlowControl(t *testing.T) {
	f := newFixture(t)
	c, _ := f.dial()
	other, _ := f.dial()
	const size = 20 << 20
	in := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range in {
		in[i] = byte(rng.Uint32())
	}
	sum := sha256.Sum256(in)

	h := sha256.New()
	out := &slowWriter{h: h, delay: 20 * time.Millisecond}
	done := make(chan error, 1)
	go func() {
		st, err := c.Exec(context.Background(), guestconn.Cmd{Args: []string{"cat"}, Stdin: bytes.NewReader(in), Stdout: out})
		if err == nil && !st.Success() {
			err = fmt.Errorf("status %v", st)
		}
		done <- err
	}()
	// While the stream runs, another client is served promptly.
	time.Sleep(200 * time.Millisecond)
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var b bytes.Buffer
		st, err := other.Exec(ctx, guestconn.Cmd{Args: []string{"echo", "beside"}, Stdout: &b})
		cancel()
		if err != nil || !st.Success() || b.String() != "beside\n" {
			t.Fatalf("exec beside the stream: %v, %v, %q", st, err, b.String())
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if out.n != size || !bytes.Equal(h.Sum(nil), sum[:]) {
		t.Fatalf("got %d bytes, want the %d sent; equal hashes: %v", out.n, size, bytes.Equal(h.Sum(nil), sum[:]))
	}
	// One session's two output channels may each have a window in
	// flight, plus framing.
	high := f.router.queueHighWater()
	t.Logf("%d bytes streamed; the router queued at most %d bytes for a client", out.n, high)
	if limit := 2*agentproto.InitialWindow + 64<<10; high > limit {
		t.Errorf("the router queued %d bytes for a client (limit %d): flow control is not holding", high, limit)
	}
	if high == 0 {
		t.Error("the router queued nothing: the measure is broken")
	}
}

// procAlive reports whether pid runs (a zombie does not count).
func procAlive(pid int) bool { return procstat.Alive(pid) }

// TestClientGoneKillsItsProcesses drops a client's connection while its
// processes run and checks that the guest killed them, and only them.
func TestClientGoneKillsItsProcesses(t *testing.T) {
	f := newFixture(t)
	victim, conn := f.dial()
	survivor, _ := f.dial()

	var pids []int
	for range 2 {
		p, err := victim.Start(context.Background(), guestconn.Cmd{Args: []string{"sleep", "1000"}})
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, p.Pid())
	}
	// A process mid-output too, whose session is waiting on credit.
	busy, err := victim.Start(context.Background(), guestconn.Cmd{Args: []string{"yes"}, Stdout: blockingWriter{}})
	if err != nil {
		t.Fatal(err)
	}
	pids = append(pids, busy.Pid())
	kept, err := survivor.Start(context.Background(), guestconn.Cmd{Args: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range append(pids, kept.Pid()) {
		if !procAlive(pid) {
			t.Fatalf("process %d is not running", pid)
		}
	}

	conn.Close() // the client dies: its socket closes under it

	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for procAlive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d of the departed client still runs", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !procAlive(kept.Pid()) {
		t.Fatal("the other client's process was killed too")
	}
	for f.router.Clients() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("router still counts %d clients", f.router.Clients())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The router forgets the cancelled sessions once the guest ends them.
	for {
		f.router.mu.Lock()
		n := len(f.router.sessions)
		f.router.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("router holds %d sessions, want only the survivor's", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := kept.Signal("KILL"); err != nil {
		t.Fatal(err)
	}
	st, err := kept.Wait()
	if err != nil || st.Signal != "SIGKILL" {
		t.Fatalf("survivor's process: %v, %v", st, err)
	}
}

// blockingWriter never returns, so the client grants no more credit.
type blockingWriter struct{}

func (blockingWriter) Write(p []byte) (int, error) { select {} }

// TestMisbehavingClient sends frames by hand that would break the guest
// connection if they reached it, and checks that only that client is
// disconnected.
func TestMisbehavingClient(t *testing.T) {
	f := newFixture(t)
	good, _ := f.dial()

	for name, send := range map[string]func(c *agentproto.Conn) error{
		"stdin past its credit": func(c *agentproto.Conn) error {
			// The process never reads, so the guest returns no credit.
			if err := c.WriteJSON(agentproto.TypeExec, 1, &agentproto.Exec{Args: []string{"sleep", "1000"}, Stdin: true}); err != nil {
				return err
			}
			chunk := make([]byte, agentproto.MaxData)
			// The guest's credit is the window plus what the process's
			// stdin pipe takes (64 KiB); 1 MiB is well past both.
			for range (1 << 20) / agentproto.MaxData {
				if err := c.WriteData(1, agentproto.ChanStdin, chunk); err != nil {
					return err
				}
			}
			return nil
		},
		"window never earned": func(c *agentproto.Conn) error {
			if err := c.WriteJSON(agentproto.TypeExec, 1, &agentproto.Exec{Args: []string{"sleep", "1000"}}); err != nil {
				return err
			}
			return c.WriteWindow(1, agentproto.ChanStdout, 1)
		},
		"stdout data": func(c *agentproto.Conn) error {
			if err := c.WriteJSON(agentproto.TypeExec, 1, &agentproto.Exec{Args: []string{"sleep", "1000"}}); err != nil {
				return err
			}
			return c.WriteData(1, agentproto.ChanStdout, []byte("x"))
		},
		"second hello": func(c *agentproto.Conn) error {
			return c.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Versions: agentproto.Versions})
		},
		"malformed exec": func(c *agentproto.Conn) error {
			return c.WriteFrame(agentproto.TypeExec, 1, []byte("{"))
		},
		"reused stream": func(c *agentproto.Conn) error {
			for range 2 {
				if err := c.WriteJSON(agentproto.TypeExec, 1, &agentproto.Exec{Args: []string{"sleep", "1000"}}); err != nil {
					return err
				}
			}
			return nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := net.Dial("unix", f.sock)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			c := agentproto.NewConn(conn)
			if err := c.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Versions: agentproto.Versions}); err != nil {
				t.Fatal(err)
			}
			if fr, err := c.ReadFrame(); err != nil || fr.Type != agentproto.TypeHello {
				t.Fatalf("hello answer: %v %v", fr.Type, err)
			}
			send(c) // a write may fail once the router has hung up
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			var gotError bool
			for {
				fr, err := c.ReadFrame()
				if err != nil {
					if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
						t.Fatalf("reading from the router: %v", err)
					}
					break
				}
				if fr.Type == agentproto.TypeError && fr.Stream == 0 {
					gotError = true
				}
			}
			if !gotError {
				t.Error("the router hung up without saying why")
			}
			var b bytes.Buffer
			st, err := good.Exec(context.Background(), guestconn.Cmd{Args: []string{"echo", "still here"}, Stdout: &b})
			if err != nil || !st.Success() || b.String() != "still here\n" {
				t.Fatalf("the other client after a misbehaving one: %v, %v, %q", st, err, b.String())
			}
		})
	}
}

// TestVersionRefused checks that a client speaking no version the guest
// chose is refused with an error frame.
func TestVersionRefused(t *testing.T) {
	f := newFixture(t)
	conn, err := net.Dial("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := agentproto.NewConn(conn)
	c.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Versions: []int{agentproto.Version + 100}})
	fr, err := c.ReadFrame()
	if err != nil || fr.Type != agentproto.TypeError {
		t.Fatalf("answer to a hello of an unknown version: %v %v", fr.Type, err)
	}
	var e agentproto.Error
	agentproto.ParseJSON(fr.Type, fr.Payload, &e)
	if !strings.Contains(e.Message, strconv.Itoa(agentproto.Version+100)) {
		t.Errorf("error %q does not name the client's versions", e.Message)
	}
}

// TestGuestEndClosesClients checks that clients learn when the guest
// connection ends.
func TestGuestEndClosesClients(t *testing.T) {
	f := newFixture(t)
	c, _ := f.dial()
	f.router.Close()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not see the guest connection end")
	}
	if _, err := c.Ping(context.Background()); !errors.Is(err, guestconn.ErrClosed) {
		t.Errorf("ping after the end = %v", err)
	}
	if err := f.router.Err(); !errors.Is(err, ErrClosed) {
		t.Errorf("router Err = %v", err)
	}
}
