package operation

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// TestNotInState: a plan shows every sandbox of the runtime directory
// that the state does not record, saying "not in the state" and what
// apply does to it — one the configuration wants is still created, apply
// stopping the one that runs first; one it does not is deleted — and
// leaves the recorded ones as the state has them.
func TestNotInState(t *testing.T) {
	st := &state.State{Resources: []*state.Resource{
		{Addr: addrs.SandboxRef("web"), Sandbox: &state.SandboxAttrs{}},
	}}
	dev := &plan.ResourceChange{Addr: addrs.SandboxRef("dev"), Action: plan.Create, After: &state.Resource{Addr: addrs.SandboxRef("dev"), Sandbox: &state.SandboxAttrs{}}}
	redo := &plan.ResourceChange{Addr: addrs.SandboxRef("redo"), Action: plan.Create, After: &state.Resource{Addr: addrs.SandboxRef("redo"), Sandbox: &state.SandboxAttrs{}}}
	web := &plan.ResourceChange{Addr: addrs.SandboxRef("web"), Action: plan.NoOp, Before: st.Resources[0], After: st.Resources[0]}
	p := &plan.Plan{Against: "state", Changes: []*plan.ResourceChange{dev, redo, web}}
	NotInState(p, st, []supervisor.Entry{
		{Name: "dev", Liveness: supervisor.Liveness{Running: true}},
		{Name: "left", Liveness: supervisor.Liveness{Gone: "its supervisor (pid 41) has exited"}},
		{Name: "redo", Liveness: supervisor.Liveness{Gone: "no spec"}},
		{Name: "stray", Liveness: supervisor.Liveness{Running: true}},
		{Name: "web", Liveness: supervisor.Liveness{Running: true}}, // recorded: the state's entry wins
	})
	var got []string
	for _, c := range p.Changes {
		got = append(got, c.Addr.String()+" "+string(c.Action)+" | "+c.Reason)
	}
	want := []string{
		"sandbox.dev create | it is not in the state, but a sandbox of that name runs: apply stops that one first",
		"sandbox.left delete | it is not in the state nor in the configuration, but it left its runtime directory (its supervisor (pid 41) has exited): apply removes what it left",
		"sandbox.redo create | it is not in the state, but a sandbox of that name left its runtime directory (no spec): apply removes what it left first",
		"sandbox.stray delete | it is not in the state nor in the configuration, but it runs: apply stops it and removes its directory",
		"sandbox.web no-op | ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if s := p.Summary(); s.Add != 2 || s.Destroy != 2 {
		t.Errorf("summary %+v; want 2 to add, 2 to destroy", s)
	}
	var out strings.Builder
	if err := plan.Render(&out, p, plan.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "not in the state"); n != 4 {
		t.Errorf("the rendered plan says \"not in the state\" %d times, want 4:\n%s", n, out.String())
	}
	// A saved plan holds the deletes with nothing before them.
	b, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var back plan.Plan
	if err := back.UnmarshalJSON(b); err != nil {
		t.Fatalf("the plan does not read back: %v", err)
	}
	if len(back.Changes) != 5 || back.Changes[3].Reason != p.Changes[3].Reason || back.Changes[3].Before != nil {
		t.Errorf("read back as %+v", back.Changes)
	}
}

// TestApplyPlansSandboxesNotInState: apply (and plan) look in the
// runtime directory: a sandbox directory there that the state does not
// record is in the plan, "not in the state", to be removed.
func TestApplyPlansSandboxesNotInState(t *testing.T) {
	cfg := writeSpec(t, "# nothing yet\n")
	base := t.TempDir()
	dir, err := supervisor.SandboxDir(base, cfg.Dir, "left")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, makePlan := range []func() (*plan.Plan, error){
		func() (*plan.Plan, error) {
			var h recorder
			out, ds := Apply(context.Background(), ApplyRequest{Config: cfg, Lock: &lockfiles.Lock{}, RuntimeBase: base}, &h)
			return out.Plan, ds.Err()
		},
		func() (*plan.Plan, error) {
			p, ds := PlanState(context.Background(), NoHooks{}, cfg, &lockfiles.Lock{}, StateReadOptions{Refresh: true}, base)
			return p, ds.Err()
		},
	} {
		p, err := makePlan()
		if err != nil {
			t.Fatal(err)
		}
		if p == nil || len(p.Changes) != 1 || p.Changes[0].Addr != addrs.SandboxRef("left") || p.Changes[0].Action != plan.Delete ||
			!strings.Contains(p.Changes[0].Reason, "not in the state") {
			t.Errorf("plan %+v; want sandbox.left deleted, not in the state", p)
		}
	}
}
