package apply

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"github.com/sbx-dev/sbx/lang"
)

// These tests cover what Apply does without starting a VM: images and
// state. Sandboxes are started and stopped for real by the command
// line's tests (package command), which boot VMs.

func imageRes(name, hash string) *state.Resource {
	a := addrs.ImageRef(name)
	return &state.Resource{Addr: a, Address: a.String(), Image: &state.ImageAttrs{Platform: "linux/amd64", InputHash: hash}}
}

// saver records every state Apply saves, as a lease would.
type saver struct {
	mu    sync.Mutex
	saves [][]string
	fail  error
}

func (s *saver) save(st *state.State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	var addrs []string
	for _, r := range st.Resources {
		addrs = append(addrs, r.Address)
	}
	s.saves = append(s.saves, addrs)
	return nil
}

func TestApplyImages(t *testing.T) {
	st := &state.State{Resources: []*state.Resource{imageRes("old", "sha256:1"), imageRes("keep", "sha256:2")}}
	p := plan.Compute([]*state.Resource{imageRes("keep", "sha256:2"), imageRes("new", "sha256:3")}, st.Resources)
	var built []string
	var sv saver
	var events []Event
	res, err := Apply(context.Background(), Options{
		Config: &lang.Config{Dir: t.TempDir()},
		Plan:   p,
		State:  st,
		Save:   sv.save,
		Build: func(_ context.Context, name string) (*image.Result, error) {
			built = append(built, name)
			return &image.Result{Image: name, Outputs: map[string]image.Output{image.OutputDisk: {Digest: "sha256:d"}}}, nil
		},
		Progress: func(e Event) { events = append(events, e) },
	})
	if err != nil || res.Applied != 2 || res.Failed != 0 || res.Skipped != 0 {
		t.Fatalf("Apply = %+v, %v; want 2 applied", res, err)
	}
	if strings.Join(built, ",") != "new" {
		t.Errorf("built %v, want only the new image", built)
	}
	var got []string
	for _, r := range st.Resources {
		got = append(got, r.Address)
	}
	if strings.Join(got, ",") != "image.keep,image.new" {
		t.Errorf("state holds %v", got)
	}
	if r := st.Lookup(addrs.ImageRef("new")); r == nil || r.Image.Outputs[image.OutputDisk] != "sha256:d" {
		t.Errorf("the new image's outputs are not recorded: %+v", r)
	}
	if len(sv.saves) != 2 {
		t.Errorf("state saved %d times, want after each of the 2 changes: %v", len(sv.saves), sv.saves)
	}
	if len(events) != 4 || events[0].Done || !events[1].Done {
		t.Errorf("events %+v, want a start and an end per change", events)
	}
}

func TestApplyBuildFailure(t *testing.T) {
	st := &state.State{}
	p := plan.Compute([]*state.Resource{imageRes("a", "sha256:1"), imageRes("b", "sha256:2")}, nil)
	var sv saver
	res, err := Apply(context.Background(), Options{
		Config: &lang.Config{Dir: t.TempDir()},
		Plan:   p,
		State:  st,
		Save:   sv.save,
		Build: func(_ context.Context, name string) (*image.Result, error) {
			if name == "a" {
				return nil, errors.New("kernel package is corrupt")
			}
			return &image.Result{Image: name}, nil
		},
	})
	if err == nil || !strings.Contains(err.Error(), "image.a: kernel package is corrupt") {
		t.Errorf("Apply error %v, want the failed image named", err)
	}
	if res.Applied != 1 || res.Failed != 1 {
		t.Errorf("Apply = %+v, want one applied, one failed", res)
	}
	if len(st.Resources) != 1 || st.Resources[0].Address != "image.b" {
		t.Errorf("state holds %v, want only the image that built", st.Resources)
	}
}

func TestApplyInterruptedBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st := &state.State{}
	p := plan.Compute([]*state.Resource{imageRes("a", "sha256:1")}, nil)
	res, err := Apply(ctx, Options{
		Config: &lang.Config{Dir: t.TempDir()},
		Plan:   p, State: st, Save: (&saver{}).save,
		Build: func(context.Context, string) (*image.Result, error) {
			t.Error("built after the interrupt")
			return nil, nil
		},
	})
	if !errors.Is(err, context.Canceled) || res.Skipped != 1 || len(st.Resources) != 0 {
		t.Errorf("Apply = %+v, %v; want interrupted with 1 skipped", res, err)
	}
}

// TestRefreshDeadSandbox: a sandbox whose supervisor directory is gone,
// and one whose recorded supervisor is dead, are marked gone; one with no
// runtime recorded is left alone.
func TestRefreshDeadSandbox(t *testing.T) {
	base := t.TempDir()
	configDir := t.TempDir()
	sb := func(name string, rt *state.Runtime) *state.Resource {
		a := addrs.SandboxRef(name)
		return &state.Resource{Addr: a, Address: a.String(), Sandbox: &state.SandboxAttrs{Image: "x", Runtime: rt}}
	}
	dir := func(name string) string {
		d, err := supervisor.SandboxDir(base, configDir, name)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	st := &state.State{Resources: []*state.Resource{
		sb("missing", &state.Runtime{Dir: dir("missing")}),
		sb("dead", &state.Runtime{Dir: dir("dead"), Pid: 1 << 30}),
		sb("unrecorded", nil),
	}}
	Refresh(context.Background(), st, base, configDir)
	if g := st.Resources[0].Sandbox.Runtime.Gone; g != "it has no supervisor" {
		t.Errorf("missing: gone %q", g)
	}
	if g := st.Resources[1].Sandbox.Runtime.Gone; !strings.Contains(g, "has exited") {
		t.Errorf("dead: gone %q", g)
	}
	if st.Resources[2].Sandbox.Runtime != nil {
		t.Errorf("unrecorded got a runtime")
	}
}

// TestRefreshCraftedRuntimeDir plays a checkout whose state records a
// sandbox as running in a directory of its choosing, with a control
// socket and a status file there. Refresh does not connect to the
// socket nor take the status for the sandbox's: the sandbox is gone, and
// Gone names the directory sbx would use.
func TestRefreshCraftedRuntimeDir(t *testing.T) {
	base, configDir := t.TempDir(), t.TempDir()
	elsewhere, err := os.MkdirTemp("", "sbx-else")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(elsewhere)
	ln, err := net.Listen("unix", filepath.Join(elsewhere, supervisor.ControlFile))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	connected := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			connected <- struct{}{}
			c.Write([]byte(`{"name":"box","state":"running","pid":1,"qemu_pid":1}` + "\n"))
			c.Close()
		}
	}()
	a := addrs.SandboxRef("box")
	rt := &state.Runtime{Dir: elsewhere, Pid: 1}
	st := &state.State{Resources: []*state.Resource{{Addr: a, Address: a.String(), Sandbox: &state.SandboxAttrs{Image: "x", Runtime: rt}}}}
	Refresh(context.Background(), st, base, configDir)
	select {
	case <-connected:
		t.Errorf("Refresh connected to %s, the control socket a crafted state named", filepath.Join(elsewhere, supervisor.ControlFile))
	default:
	}
	own, err := supervisor.SandboxDir(base, configDir, "box")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rt.Gone, elsewhere) || !strings.Contains(rt.Gone, own) {
		t.Errorf("Gone = %q; want it to name %s and %s", rt.Gone, elsewhere, own)
	}
}
