package guestconn

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

// The client against the real server (package guest/execsrv) is tested
// there, on Linux. These tests put a scripted guest on the other end of
// an in-memory connection, for what a correct server never does.

// scriptedGuest reads frames from the host and answers with respond.
func scriptedGuest(t *testing.T, respond func(g *agentproto.Conn, f agentproto.Frame)) net.Conn {
	host, guest := net.Pipe()
	g := agentproto.NewConn(guest)
	go func() {
		defer guest.Close()
		for {
			f, err := g.ReadFrame()
			if err != nil {
				return
			}
			respond(g, f)
		}
	}()
	t.Cleanup(func() { host.Close() })
	return host
}

func helloOK(g *agentproto.Conn, f agentproto.Frame) bool {
	if f.Type != agentproto.TypeHello {
		return false
	}
	g.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Version: agentproto.Version, Software: "scripted"})
	return true
}

func TestDialRefused(t *testing.T) {
	conn := scriptedGuest(t, func(g *agentproto.Conn, f agentproto.Frame) {
		g.WriteJSON(agentproto.TypeError, 0, &agentproto.Error{Code: agentproto.CodeProtocol, Message: "no common protocol version"})
	})
	_, err := Dial(conn)
	var pe *agentproto.Error
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "no common protocol version") {
		t.Errorf("Dial = %v", err)
	}
}

func TestDialUnknownVersion(t *testing.T) {
	conn := scriptedGuest(t, func(g *agentproto.Conn, f agentproto.Frame) {
		g.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Version: 99})
	})
	if _, err := Dial(conn); err == nil || !strings.Contains(err.Error(), "version 99") {
		t.Errorf("Dial = %v", err)
	}
}

func TestDialTimeout(t *testing.T) {
	conn := scriptedGuest(t, func(g *agentproto.Conn, f agentproto.Frame) {})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := DialContext(ctx, conn); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("DialContext = %v", err)
	}
}

// TestGuestOverrunEndsConnection: a guest that sends more than its credit
// breaks the protocol; the client ends the connection rather than buffer.
func TestGuestOverrunEndsConnection(t *testing.T) {
	conn := scriptedGuest(t, func(g *agentproto.Conn, f agentproto.Frame) {
		if helloOK(g, f) {
			return
		}
		if f.Type == agentproto.TypeExec {
			g.WriteJSON(agentproto.TypeStarted, f.Stream, &agentproto.Started{Pid: 42})
			go func() {
				for range agentproto.InitialWindow/agentproto.MaxData + 2 {
					if g.WriteData(f.Stream, agentproto.ChanStdout, make([]byte, agentproto.MaxData)) != nil {
						return
					}
				}
			}()
		}
	})
	c, err := Dial(conn)
	if err != nil {
		t.Fatal(err)
	}
	// A writer that never returns keeps the window full.
	block := make(chan struct{})
	defer close(block)
	p, err := c.Start(context.Background(), Cmd{Args: []string{"x"}, Stdout: writerFunc(func(b []byte) (int, error) {
		<-block
		return len(b), nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	if p.Pid() != 42 {
		t.Errorf("pid %d", p.Pid())
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the connection survived a credit overrun")
	}
	if err := c.Err(); !errors.Is(err, ErrClosed) || !errors.Is(err, agentproto.ErrWindow) {
		t.Errorf("connection error %v", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestPingAndClose(t *testing.T) {
	conn := scriptedGuest(t, func(g *agentproto.Conn, f agentproto.Frame) {
		if helloOK(g, f) {
			return
		}
		if f.Type == agentproto.TypePing {
			g.WriteFrame(agentproto.TypePong, 0, f.Payload)
		}
	})
	c, err := Dial(conn)
	if err != nil {
		t.Fatal(err)
	}
	if c.Guest().Software != "scripted" {
		t.Errorf("guest hello %+v", c.Guest())
	}
	for range 3 {
		if _, err := c.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if _, err := c.Ping(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Ping after Close = %v", err)
	}
}

func TestModeBits(t *testing.T) {
	for _, m := range []fs.FileMode{0o644, 0o755 | fs.ModeSetuid, 0o2750&fs.ModePerm | fs.ModeSetgid, 0o777 | fs.ModeSticky} {
		if got := fsMode(unixMode(m)); got != m {
			t.Errorf("%v → %o → %v", m, unixMode(m), got)
		}
	}
	if unixMode(0o755|fs.ModeSetuid) != 0o4755 {
		t.Errorf("setuid bits: %o", unixMode(0o755|fs.ModeSetuid))
	}
}

// TestStartQuickCommand: a command that starts and exits before Start
// looks (the guest sends started and exit back to back) is a started
// process, never "ended before starting". Start picks between the two
// at random when both are ready, so it is tried many times.
func TestStartQuickCommand(t *testing.T) {
	conn := scriptedGuest(t, func(g *agentproto.Conn, f agentproto.Frame) {
		if helloOK(g, f) {
			return
		}
		if f.Type == agentproto.TypeExec {
			g.WriteJSON(agentproto.TypeStarted, f.Stream, &agentproto.Started{Pid: 7})
			g.WriteJSON(agentproto.TypeExit, f.Stream, &agentproto.Exit{Code: 3})
		}
	})
	c, err := Dial(conn)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		st, err := c.Exec(context.Background(), Cmd{Args: []string{"true"}})
		if err != nil || st.Code != 3 {
			t.Fatalf("exec %d: %v, %v; want exit 3", i, st, err)
		}
	}
}
