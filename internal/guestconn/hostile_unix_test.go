//go:build unix

package guestconn

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/internal/socketpair"
)

// These tests play a hostile guest on the far end of a socket pair, as
// the guest agent's port is: it says hello, then answers only what it
// wants to, or nothing at all.

// hostileGuest answers the hello, then hands every frame to respond.
// respond returns false to stop reading the connection altogether
// (leaving it open), so that the host's writes end up blocked.
func hostileGuest(t *testing.T, respond func(g *agentproto.Conn, f agentproto.Frame) bool) *Client {
	t.Helper()
	host, guest := socketpair.New(t)
	g := agentproto.NewConn(guest)
	go func() {
		for {
			f, err := g.ReadFrame()
			if err != nil {
				return
			}
			if f.Type == agentproto.TypeHello {
				g.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Version: agentproto.Version, Software: "hostile"})
				continue
			}
			if !respond(g, f) {
				return
			}
		}
	}()
	c, err := Dial(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.grace = 50 * time.Millisecond
	return c
}

// swallow reads everything and answers nothing.
func swallow(*agentproto.Conn, agentproto.Frame) bool { return true }

// within runs f and fails the test if it has not returned after a
// minute: the calls under test wait on a guest that never answers, and
// without their bound they would wait forever.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s still waits on a guest that does not answer", what)
	}
}

// TestStartGuestNeverStarts: a guest that swallows the exec request and
// the cancel that follows does not keep Start waiting once ctx ends; the
// connection to such a guest is closed.
func TestStartGuestNeverStarts(t *testing.T) {
	c := hostileGuest(t, swallow)
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	within(t, "Start", func() {
		time.AfterFunc(20*time.Millisecond, cancel)
		_, err = c.Start(ctx, Cmd{Args: []string{"sleep", "1000"}})
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Start = %v; want context.Canceled", err)
	}
	within(t, "the connection's end", func() { <-c.Done() })
	if err := c.Err(); !strings.Contains(err.Error(), "did not end exec \"sleep\"") {
		t.Errorf("connection error %v; want one naming the unanswered cancel", err)
	}
}

// TestExecTimeoutGuestNeverExits: a guest that says the process started
// and then ignores the cancel: Exec returns with ctx's error.
func TestExecTimeoutGuestNeverExits(t *testing.T) {
	c := hostileGuest(t, func(g *agentproto.Conn, f agentproto.Frame) bool {
		switch f.Type {
		case agentproto.TypeExec:
			g.WriteJSON(agentproto.TypeStarted, f.Stream, &agentproto.Started{Pid: 1})
			g.WriteData(f.Stream, agentproto.ChanStdout, []byte("running\n"))
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	var err error
	within(t, "Exec", func() {
		_, err = c.Exec(ctx, Cmd{Args: []string{"sh"}, Stdout: &out})
	})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrClosed) {
		t.Errorf("Exec = %v; want the deadline, and the connection closed", err)
	}
	if out.String() != "running\n" {
		t.Errorf("stdout %q", out.String())
	}
}

// TestGetGuestNeverAnswers: a get that the guest never answers ends with
// ctx.
func TestGetGuestNeverAnswers(t *testing.T) {
	c := hostileGuest(t, swallow)
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	within(t, "Get", func() {
		time.AfterFunc(20*time.Millisecond, cancel)
		_, err = c.Get(ctx, "/etc/passwd", io.Discard)
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Get = %v; want context.Canceled", err)
	}
	within(t, "the connection's end", func() { <-c.Done() })
}

// TestPutGuestStopsReading: a guest that grants all the credit there is
// and then stops reading leaves the host's write blocked in the kernel;
// ctx still ends Put, by closing the connection.
func TestPutGuestStopsReading(t *testing.T) {
	c := hostileGuest(t, func(g *agentproto.Conn, f agentproto.Frame) bool {
		if f.Type == agentproto.TypeFilePut {
			// All the credit a sender may hold (agentproto's
			// maxCredit, 1 GiB): far more than the socket buffers.
			g.WriteWindow(f.Stream, agentproto.ChanStdin, 1<<30-agentproto.InitialWindow)
			return false
		}
		return true
	})
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	within(t, "Put", func() {
		time.AfterFunc(100*time.Millisecond, cancel)
		err = c.Put(ctx, zeros{}, "/tmp/big", 0o644, nil)
	})
	if !errors.Is(err, context.Canceled) && !errors.Is(err, ErrClosed) {
		t.Errorf("Put = %v; want context.Canceled or the connection closed", err)
	}
	within(t, "the connection's end", func() { <-c.Done() })
}

// TestPutGuestNeverResults: the whole file is sent, and the guest never
// says whether it wrote it.
func TestPutGuestNeverResults(t *testing.T) {
	c := hostileGuest(t, func(g *agentproto.Conn, f agentproto.Frame) bool {
		if f.Type == agentproto.TypeFilePut {
			g.WriteWindow(f.Stream, agentproto.ChanStdin, agentproto.InitialWindow)
		}
		return true
	})
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	within(t, "Put", func() {
		time.AfterFunc(50*time.Millisecond, cancel)
		err = c.Put(ctx, strings.NewReader("content"), "/tmp/f", 0o644, nil)
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Put = %v; want context.Canceled", err)
	}
	within(t, "the connection's end", func() { <-c.Done() })
}

// TestPingGuestNeverPongs: Ping ends with ctx, and a guest that never
// answers loses the connection.
func TestPingGuestNeverPongs(t *testing.T) {
	c := hostileGuest(t, swallow)
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	within(t, "Ping", func() {
		time.AfterFunc(20*time.Millisecond, cancel)
		_, err = c.Ping(ctx)
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Ping = %v", err)
	}
	within(t, "the connection's end", func() { <-c.Done() })
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestGetMoreThanAnnounced: a guest that announces 4 bytes and sends
// more gets an error as soon as the excess arrives, and none of the
// excess reaches the writer.
func TestGetMoreThanAnnounced(t *testing.T) {
	c := hostileGuest(t, func(g *agentproto.Conn, f agentproto.Frame) bool {
		if f.Type == agentproto.TypeFileGet {
			g.WriteJSON(agentproto.TypeFileInfo, f.Stream, &agentproto.FileInfo{Size: 4, Mode: 0o644})
			g.WriteData(f.Stream, agentproto.ChanStdout, []byte("abcd"))
			g.WriteData(f.Stream, agentproto.ChanStdout, bytes.Repeat([]byte("X"), 1000))
			// No Result: the host must not wait for the end to
			// notice.
		}
		return true
	})
	var out bytes.Buffer
	var err error
	within(t, "Get", func() { _, err = c.Get(context.Background(), "/f", &out) })
	if err == nil || !strings.Contains(err.Error(), "more than the 4 bytes it announced") {
		t.Errorf("Get = %v; want an error about the excess", err)
	}
	if out.Len() > 4 {
		t.Errorf("the writer got %d bytes; the guest announced 4", out.Len())
	}
}

// TestGetFewerThanAnnounced: a guest that ends a transfer short of the
// size it announced fails the get.
func TestGetFewerThanAnnounced(t *testing.T) {
	c := hostileGuest(t, func(g *agentproto.Conn, f agentproto.Frame) bool {
		if f.Type == agentproto.TypeFileGet {
			g.WriteJSON(agentproto.TypeFileInfo, f.Stream, &agentproto.FileInfo{Size: 10, Mode: 0o644})
			g.WriteData(f.Stream, agentproto.ChanStdout, []byte("abcd"))
			g.WriteJSON(agentproto.TypeResult, f.Stream, &agentproto.Result{})
		}
		return true
	})
	var err error
	within(t, "Get", func() { _, err = c.Get(context.Background(), "/f", io.Discard) })
	if err == nil || !strings.Contains(err.Error(), "got 4 bytes, the guest announced 10") {
		t.Errorf("Get = %v", err)
	}
}

// TestGuestOutOfOrder: a guest whose frames break the session's grammar
// (agentproto.Session) ends the connection with the grammar's refusal,
// the same words the router and the guest server use.
func TestGuestOutOfOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pty     bool
		frame   func(g *agentproto.Conn, id uint32)
		refusal string
	}{
		{"started twice", false, func(g *agentproto.Conn, id uint32) {
			g.WriteJSON(agentproto.TypeStarted, id, &agentproto.Started{Pid: 2})
		}, "a second started frame"},
		{"stderr of a terminal", true, func(g *agentproto.Conn, id uint32) {
			g.WriteData(id, agentproto.ChanStderr, []byte("x"))
		}, "data on stderr, which the exec session does not have"},
		{"window on stdout", false, func(g *agentproto.Conn, id uint32) {
			g.WriteWindow(id, agentproto.ChanStdout, 1)
		}, "window on stdout, where the host sends nothing"},
		{"result on an exec", false, func(g *agentproto.Conn, id uint32) {
			g.WriteJSON(agentproto.TypeResult, id, &agentproto.Result{})
		}, "result frame on an exec session"},
		{"output after its eof", false, func(g *agentproto.Conn, id uint32) {
			g.WriteEOF(id, agentproto.ChanStdout)
			g.WriteData(id, agentproto.ChanStdout, []byte("x"))
		}, "data on stdout after its eof"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hostileGuest(t, func(g *agentproto.Conn, f agentproto.Frame) bool {
				if f.Type == agentproto.TypeExec {
					g.WriteJSON(agentproto.TypeStarted, f.Stream, &agentproto.Started{Pid: 1})
					tc.frame(g, f.Stream)
				}
				return true
			})
			cmd := Cmd{Args: []string{"x"}}
			if tc.pty {
				cmd.PTY = &PTY{Rows: 1, Cols: 1}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			within(t, "Exec", func() {
				if _, err := c.Exec(ctx, cmd); err == nil || !errors.Is(err, ErrClosed) {
					t.Errorf("Exec = %v; want the connection closed", err)
				}
			})
			<-c.Done()
			if err := c.Err(); !strings.Contains(err.Error(), "guest broke the protocol: stream 1: "+tc.refusal) {
				t.Errorf("connection error %v; want the refusal %q", err, tc.refusal)
			}
		})
	}
}
