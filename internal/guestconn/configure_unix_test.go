//go:build unix

package guestconn

import (
	"context"
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/internal/socketpair"
)

// configGuest is hostileGuest for a guest that announces configure.
func configGuest(t *testing.T, respond func(g *agentproto.Conn, f agentproto.Frame)) *Client {
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
				g.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Version: agentproto.Version, Capabilities: []string{agentproto.CapConfigure}})
				continue
			}
			respond(g, f)
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

var okConfig = agentproto.Configure{Net: &agentproto.NetConfig{Interface: "eth0", Addr: "10.83.0.2/24", Gateway: "10.83.0.1"}, Env: []string{"A=1"}}

func TestConfigureResult(t *testing.T) {
	got := make(chan agentproto.Configure, 1)
	c := configGuest(t, func(g *agentproto.Conn, f agentproto.Frame) {
		if f.Type == agentproto.TypeConfigure {
			var req agentproto.Configure
			agentproto.ParseJSON(f.Type, f.Payload, &req)
			got <- req
			g.WriteJSON(agentproto.TypeResult, f.Stream, &agentproto.Result{})
		}
	})
	if err := c.Configure(context.Background(), okConfig); err != nil {
		t.Fatal(err)
	}
	if req := <-got; req.Net == nil || *req.Net != *okConfig.Net || len(req.Env) != 1 {
		t.Errorf("the guest got %+v", req)
	}
}

func TestConfigureGuestError(t *testing.T) {
	c := configGuest(t, func(g *agentproto.Conn, f agentproto.Frame) {
		if f.Type == agentproto.TypeConfigure {
			g.WriteJSON(agentproto.TypeResult, f.Stream, &agentproto.Result{Error: &agentproto.Error{Code: "EACCES", Message: "writing /etc/hosts: permission denied"}})
		}
	})
	err := c.Configure(context.Background(), okConfig)
	var pe *agentproto.Error
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrPermission) || pe.Message != "writing /etc/hosts: permission denied" {
		t.Errorf("Configure = %v, want the guest's error", err)
	}
}

// TestConfigureInvalidNotSent: the host checks the request before the
// guest sees any of it.
func TestConfigureInvalidNotSent(t *testing.T) {
	sent := make(chan agentproto.Type, 8)
	c := configGuest(t, func(g *agentproto.Conn, f agentproto.Frame) {
		sent <- f.Type
		if f.Type == agentproto.TypePing {
			g.WriteFrame(agentproto.TypePong, 0, f.Payload)
		}
	})
	bad := agentproto.Configure{Hosts: []string{"10.0.0.1 a\n10.0.0.2 b"}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Configure(ctx, bad); err == nil {
		t.Fatal("an invalid request was accepted")
	}
	if _, err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if typ := <-sent; typ != agentproto.TypePing {
		t.Errorf("the guest got %v before the ping", typ)
	}
}

// TestConfigureGuestNeverAnswers: a guest that swallows the request and
// its cancel does not keep Configure waiting past its context, and loses
// the connection.
func TestConfigureGuestNeverAnswers(t *testing.T) {
	c := configGuest(t, func(*agentproto.Conn, agentproto.Frame) {})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	within(t, "Configure", func() {
		if err := c.Configure(ctx, okConfig); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Configure = %v, want the context's deadline", err)
		}
	})
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the connection to a guest that never ended a canceled configure stayed open")
	}
}

// TestConfigureMalformedResult: a result the host cannot read breaks the
// protocol: the connection ends and Configure says so.
func TestConfigureMalformedResult(t *testing.T) {
	c := configGuest(t, func(g *agentproto.Conn, f agentproto.Frame) {
		if f.Type == agentproto.TypeConfigure {
			g.WriteFrame(agentproto.TypeResult, f.Stream, []byte("{not json"))
		}
	})
	within(t, "Configure", func() {
		if err := c.Configure(context.Background(), okConfig); !errors.Is(err, ErrClosed) {
			t.Errorf("Configure = %v, want ErrClosed", err)
		}
	})
}

func TestConfigureUnsupported(t *testing.T) {
	c := hostileGuest(t, swallow)
	if err := c.Configure(context.Background(), okConfig); !errors.Is(err, ErrNoConfigure) {
		t.Errorf("Configure on a guest without the capability = %v", err)
	}
}
