package execsrv_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/guest/execsrv"
	"github.com/sbx-dev/sbx/internal/guest/guestcfg"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

// configurer is the agent's configurer on a temporary root, with the
// interface step (which needs a guest) recorded instead.
func configurer(t *testing.T) (*guestcfg.State, *[]agentproto.NetConfig) {
	var got []agentproto.NetConfig
	return guestcfg.New(guestcfg.Options{Root: t.TempDir(), Hostname: "box", Net: func(_ context.Context, nc agentproto.NetConfig) error {
		got = append(got, nc)
		return nil
	}}), &got
}

func envMap(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// TestConfigure: a configure request's environment reaches every later
// exec, under the exec's own Env and over the user's defaults, and
// outlives the connection that sent it.
func TestConfigure(t *testing.T) {
	cfg, _ := configurer(t)
	opts := execsrv.Options{Configurer: cfg}
	c := serve(t, opts)
	if !c.Guest().Has(agentproto.CapConfigure) {
		t.Fatalf("hello %+v without %q", c.Guest(), agentproto.CapConfigure)
	}
	// Before any configure: no defaults beyond the user's.
	stdout, _, _ := run(t, c, guestconn.Cmd{Args: []string{"env"}})
	if env := envMap(stdout); env["TOKEN"] != "" || env["SSL_CERT_FILE"] != "" {
		t.Errorf("defaults before any configure: %v", env)
	}
	err := c.Configure(context.Background(), agentproto.Configure{Env: []string{"TOKEN=sbx-ph-1", "PATH=/configured"}})
	if err != nil {
		t.Fatal(err)
	}
	stdout, _, _ = run(t, c, guestconn.Cmd{Args: []string{"/usr/bin/env"}})
	env := envMap(stdout)
	if env["TOKEN"] != "sbx-ph-1" || env["PATH"] != "/configured" || env["HOME"] == "" {
		t.Errorf("env after configure: %v", env)
	}
	stdout, _, _ = run(t, c, guestconn.Cmd{Args: []string{"/usr/bin/env"}, Env: []string{"TOKEN=own"}})
	if env := envMap(stdout); env["TOKEN"] != "own" {
		t.Errorf("an exec's own Env did not win: TOKEN=%q", env["TOKEN"])
	}

	// A new connection (a restarted supervisor) finds the defaults.
	c2 := serve(t, opts)
	stdout, _, _ = run(t, c2, guestconn.Cmd{Args: []string{"/usr/bin/env"}})
	if env := envMap(stdout); env["TOKEN"] != "sbx-ph-1" {
		t.Errorf("a second connection lost the configured env: %v", env)
	}
}

// TestConfigureGuestError: the configurer's error comes back as the
// guest's, and the connection serves on.
func TestConfigureGuestError(t *testing.T) {
	opts := execsrv.Options{Configurer: guestcfg.New(guestcfg.Options{Root: t.TempDir(), Hostname: "box",
		Net: func(context.Context, agentproto.NetConfig) error {
			return errors.New("netcfg: no interface eth0 within 10s")
		}})}
	c := serve(t, opts)
	err := c.Configure(context.Background(), agentproto.Configure{Net: &agentproto.NetConfig{Interface: "eth0", Addr: "10.83.0.2/24"}})
	var pe *agentproto.Error
	if !errors.As(err, &pe) || !strings.Contains(pe.Message, "no interface eth0") {
		t.Fatalf("Configure = %v, want the guest's error", err)
	}
	if _, err := c.Ping(context.Background()); err != nil {
		t.Errorf("the connection did not survive a failed configure: %v", err)
	}
}

// TestConfigureWithoutConfigurer: an agent that cannot configure says so
// in its hello and answers a request it gets anyway.
func TestConfigureWithoutConfigurer(t *testing.T) {
	c := serve(t, execsrv.Options{})
	if c.Guest().Has(agentproto.CapConfigure) {
		t.Error("an agent without a configurer announces configure")
	}
	if err := c.Configure(context.Background(), agentproto.Configure{}); !errors.Is(err, guestconn.ErrNoConfigure) {
		t.Errorf("Configure = %v, want ErrNoConfigure", err)
	}
	r := dialRaw(t, execsrv.Options{})
	r.conn.WriteJSON(agentproto.TypeConfigure, 1, &agentproto.Configure{})
	f := r.read()
	var m agentproto.Result
	agentproto.ParseJSON(f.Type, f.Payload, &m)
	if f.Type != agentproto.TypeResult || f.Stream != 1 || m.Error == nil || m.Error.Code != agentproto.CodeUnsupported {
		t.Errorf("answer: %v on stream %d, %+v", f.Type, f.Stream, m.Error)
	}
}

// TestConfigureHostile sends what the host-side client never would:
// malformed requests, each answered with an error result while the
// connection serves on and the guest changes nothing.
func TestConfigureHostile(t *testing.T) {
	cfg, nets := configurer(t)
	r := dialRaw(t, execsrv.Options{Configurer: cfg})
	for i, p := range []string{
		`{not json`,
		`{"env": 5}`,
		`{"env": ["A=1", "B"]}`,
		`{"hosts": ["10.0.0.1 a\n10.6.6.6 bank.example"]}`,
		`{"net": {"interface": "eth0", "addr": "10.83.0.2/24", "dns": "1.1.1.1\noptions ndots:99"}}`,
		`{"net": {"interface": "eth0", "addr": "10.83.0.2/24", "gateway": "8.8.8.8"}}`,
		`{"ca_cert_pem": "bm90IGEgY2VydA=="}`,
		`null`,
	} {
		stream := uint32(i + 1)
		if err := r.conn.WriteFrame(agentproto.TypeConfigure, stream, []byte(p)); err != nil {
			t.Fatal(err)
		}
		f := r.read()
		var m agentproto.Result
		agentproto.ParseJSON(f.Type, f.Payload, &m)
		// "null" decodes to an empty request, which is valid.
		wantErr := p != `null`
		if f.Type != agentproto.TypeResult || f.Stream != stream || (m.Error != nil) != wantErr {
			t.Errorf("%s: answer %v on stream %d, error %+v", p, f.Type, f.Stream, m.Error)
		} else if wantErr && m.Error.Code != agentproto.CodeProtocol {
			t.Errorf("%s: error code %q, want %q", p, m.Error.Code, agentproto.CodeProtocol)
		}
	}
	r.conn.WriteFrame(agentproto.TypePing, 0, []byte("alive"))
	if f := r.read(); f.Type != agentproto.TypePong || string(f.Payload) != "alive" {
		t.Errorf("after malformed requests: %v %q", f.Type, f.Payload)
	}
	if len(*nets) > 0 || len(cfg.Env()) > 0 {
		t.Errorf("malformed requests changed the network %v or the env %q", *nets, cfg.Env())
	}
}

// TestConfigureCanceled: the host canceling a configure that waits (for
// an interface that never appears) gets a canceled result at once.
func TestConfigureCanceled(t *testing.T) {
	started := make(chan struct{})
	opts := execsrv.Options{Configurer: guestcfg.New(guestcfg.Options{Root: t.TempDir(), Hostname: "box",
		Net: func(ctx context.Context, _ agentproto.NetConfig) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		}})}
	c := serve(t, opts)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- c.Configure(ctx, agentproto.Configure{Net: &agentproto.NetConfig{Interface: "eth0", Addr: "10.83.0.2/24"}})
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the configure request did not reach the interface step")
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Configure = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Configure did not return after its context ended")
	}
	// The guest ended the session: the connection is still good.
	if _, err := c.Ping(context.Background()); err != nil {
		t.Errorf("ping after a canceled configure: %v", err)
	}
}
