package apply

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// serveStatus answers "status" on dir's control socket with st, as a
// supervisor does.
func serveStatus(t *testing.T, dir string, st supervisor.Status) {
	t.Helper()
	path := filepath.Join(dir, supervisor.ControlFile)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	b, _ := json.Marshal(st)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			bufio.NewReader(conn).ReadString('\n')
			conn.Write(append(b, '\n'))
			conn.Close()
		}
	}()
}

// TestRefreshReplacesAnUnhealthySandbox: a sandbox whose supervisor runs
// but reports that its guest agent does not answer is refreshed as one
// that cannot run commands, and the plan replaces it saying so, rather
// than finding no changes.
func TestRefreshReplacesAnUnhealthySandbox(t *testing.T) {
	base, err := os.MkdirTemp("", "sbx") // short: socket paths go under it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	configDir := t.TempDir()
	dir, err := supervisor.SandboxDir(base, configDir, "box")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	serveStatus(t, dir, supervisor.Status{Name: "box", State: supervisor.StateRunning, Pid: os.Getpid(), QEMUPid: 42,
		Agent: "did not answer a ping within 10s"})
	a := addrs.SandboxRef("box")
	attrs := func() *state.SandboxAttrs {
		return &state.SandboxAttrs{Image: "agent", ImageHash: "sha256:1", CPUs: 1}
	}
	before := &state.Resource{Addr: a, Address: a.String(), Sandbox: attrs()}
	before.Sandbox.Runtime = &state.Runtime{Dir: dir, Pid: os.Getpid(), QEMUPid: 42}
	st := &state.State{Resources: []*state.Resource{before}}
	Refresh(context.Background(), st, base, configDir)
	rt := before.Sandbox.Runtime
	want := "its guest agent did not answer a ping within 10s (supervisor pid "
	if !strings.HasPrefix(rt.Unhealthy, want) || rt.Gone != rt.Unhealthy {
		t.Fatalf("refreshed runtime: gone %q, unhealthy %q; want both to begin %q", rt.Gone, rt.Unhealthy, want)
	}
	p := plan.Compute([]*state.Resource{{Addr: a, Address: a.String(), Sandbox: attrs()}}, st.Resources)
	if !p.HasChanges() || len(p.Changes) != 1 {
		t.Fatalf("plan of an unhealthy sandbox: %+v", p.Changes)
	}
	rc := p.Changes[0]
	if rc.Action != plan.Replace || !strings.HasPrefix(rc.Reason, "it cannot run commands ("+want) {
		t.Errorf("action %s, reason %q; want a replace because it cannot run commands", rc.Action, rc.Reason)
	}
}
