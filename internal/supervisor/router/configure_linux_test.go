package router

import (
	"context"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/internal/socketpair"
)

// TestOnlyTheSupervisorConfigures: a client of the socket (ServeConn)
// that asks to configure the guest — to point its resolver elsewhere,
// drop the CA or change every exec's environment — is refused and the
// guest never sees the request; the supervisor's own client
// (ServeConfigurer) gets it through.
func TestOnlyTheSupervisorConfigures(t *testing.T) {
	r, g := newGuestRouter(t, func(g *fakeGuest, f agentproto.Frame) bool {
		if f.Type == agentproto.TypeConfigure {
			g.conn.WriteJSON(agentproto.TypeResult, f.Stream, &agentproto.Result{})
			select {
			case g.frames <- f:
			default:
			}
			return true
		}
		return false
	})

	c := dialRouter(t, r)
	if err := c.WriteJSON(agentproto.TypeConfigure, 1, &agentproto.Configure{Env: []string{"HTTPS_PROXY=http://attacker"}}); err != nil {
		t.Fatal(err)
	}
	var res agentproto.Result
	if !c.readUntil(t, func(f agentproto.Frame) bool {
		return f.Type == agentproto.TypeResult && f.Stream == 1 && agentproto.ParseJSON(f.Type, f.Payload, &res) == nil
	}) {
		t.Fatal("no result for the configure request of a socket client")
	}
	if res.Error == nil || res.Error.Code != agentproto.CodeUnsupported {
		t.Errorf("a socket client's configure was answered %+v; want it refused", res)
	}
	select {
	case f := <-g.frames:
		if f.Type == agentproto.TypeConfigure {
			t.Fatal("a socket client's configure request reached the guest")
		}
	case <-time.After(200 * time.Millisecond):
	}

	cl, srv := socketpair.New(t)
	go r.ServeConfigurer(srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := guestconn.DialContext(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.Configure(ctx, agentproto.Configure{Env: []string{"TOKEN=placeholder"}}); err != nil {
		t.Fatalf("the supervisor's configure: %v", err)
	}
	f := g.await(t, agentproto.TypeConfigure)
	var got agentproto.Configure
	if err := agentproto.ParseJSON(f.Type, f.Payload, &got); err != nil || len(got.Env) != 1 || got.Env[0] != "TOKEN=placeholder" {
		t.Errorf("the guest got %+v, %v", got, err)
	}
}
