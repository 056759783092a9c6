package supervisor

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/guest/execsrv"
	"github.com/sbx-dev/sbx/internal/socketpair"
	"github.com/sbx-dev/sbx/internal/supervisor/router"
)

// gate copies src to dst while it is open; closed, it holds what it
// read, as a guest agent that no longer runs holds its port's bytes.
type gate struct {
	mu     sync.Mutex
	closed bool
	cond   *sync.Cond
}

func newGate() *gate {
	g := &gate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

func (g *gate) copy(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		g.mu.Lock()
		for g.closed {
			g.cond.Wait() // never opened again: the bytes stay here
		}
		g.mu.Unlock()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestStatusReportsAWedgedAgent: a supervisor whose guest agent stops
// answering (here the real exec server behind a link that stops
// carrying, as an agent whose every thread waits) is reported by Inspect
// as unhealthy, not running, within Inspect's own bound; while the agent
// answers it is running.
func TestStatusReportsAWedgedAgent(t *testing.T) {
	hostEnd, linkHost := socketpair.New(t)
	linkGuest, guestEnd := socketpair.New(t)
	g := newGate()
	go g.copy(linkGuest, linkHost)
	go g.copy(linkHost, linkGuest)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go execsrv.Serve(ctx, guestEnd, execsrv.Options{Root: t.TempDir(), Software: "sbx-guest test"})
	helloCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	r, err := router.New(helloCtx, hostEnd, router.Options{})
	stop()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	// Unix socket paths are short; t.TempDir's may not be.
	dir, err := os.MkdirTemp("", "sup")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := listenPrivate(filepath.Join(dir, ControlFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctl := &control{l: l, stop: make(chan struct{}), status: func() Status {
		return Status{Name: "box", State: StateRunning, Pid: os.Getpid()}
	}, ping: func(ctx context.Context) error { return pingGuest(ctx, r) }}
	go ctl.serve()
	defer ctl.finish(nil)

	if lv := Inspect(ctx, dir, os.Getpid(), 0); !lv.Running || lv.Unhealthy != "" {
		t.Fatalf("with an agent that answers: %+v", lv)
	}
	g.close()
	lv := Inspect(ctx, dir, os.Getpid(), 0)
	if lv.Running || !strings.Contains(lv.Unhealthy, "guest agent did not answer a ping") || lv.Gone != lv.Unhealthy {
		t.Fatalf("with an agent that no longer answers: %+v", lv)
	}
	t.Logf("unhealthy: %s", lv.Unhealthy)
	// Asked again, it says the same: the pings left unanswered do not
	// wedge the supervisor's own side.
	if lv := Inspect(ctx, dir, os.Getpid(), 0); lv.Unhealthy == "" {
		t.Fatalf("asked a second time: %+v", lv)
	}
}
