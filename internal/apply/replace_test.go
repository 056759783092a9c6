package apply

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"github.com/sbx-dev/sbx/lang"
)

// replaceWorld is a configuration whose sandbox "box" runs (as far as
// state says) in the supervisor directory sbx gives it, which holds what
// a supervisor that died left, and a plan that replaces it.
func replaceWorld(t *testing.T) (Options, string) {
	t.Helper()
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
	for _, name := range []string{supervisor.SpecFile, supervisor.LogFile} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a := addrs.SandboxRef("box")
	before := &state.Resource{Addr: a, Address: a.String(), Sandbox: &state.SandboxAttrs{Image: "agent", ImageHash: "sha256:1", CPUs: 1, Runtime: &state.Runtime{Dir: dir}}}
	after := &state.Resource{Addr: a, Address: a.String(), Sandbox: &state.SandboxAttrs{Image: "agent", ImageHash: "sha256:2", CPUs: 1}}
	st := &state.State{Resources: []*state.Resource{before}}
	return Options{
		Config:      &lang.Config{Dir: configDir, Sandboxes: map[string]*lang.Sandbox{"box": {Name: "box", Image: "agent", CPUs: 1}}},
		Plan:        &plan.Plan{Against: "state", Changes: []*plan.ResourceChange{{Addr: a, Action: plan.Replace, Before: before, After: after}}},
		State:       st,
		RuntimeBase: base,
	}, dir
}

// TestApplyInterruptedReplaceCountsDestroy: an apply interrupted after a
// replace stopped the old sandbox, before the new one started, counts
// the sandbox as destroyed, says so in its error and in the change's
// last event, and leaves it out of state.
func TestApplyInterruptedReplaceCountsDestroy(t *testing.T) {
	opts, dir := replaceWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sv saver
	// The interrupt comes as the stop is saved: in between the replace's
	// two halves.
	opts.Save = func(st *state.State) error {
		cancel()
		return sv.save(st)
	}
	opts.Build = func(context.Context, string) (*image.Result, error) {
		t.Error("built after the interrupt")
		return nil, errors.New("interrupted")
	}
	var events []Event
	opts.Progress = func(e Event) { events = append(events, e) }
	res, err := Apply(ctx, opts)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "old sandbox was stopped and removed, but the apply was interrupted before the new one started") {
		t.Errorf("Apply error %v; want it interrupted, saying the old sandbox was stopped", err)
	}
	if res.Destroyed != 1 || res.Replaced != 0 || res.Skipped != 1 || res.Applied != 0 {
		t.Errorf("Apply = %+v; want 1 destroyed, 1 not done", res)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("the old sandbox's directory %s is still there (%v)", dir, err)
	}
	if len(opts.State.Resources) != 0 {
		t.Errorf("state still records %v", opts.State.Resources)
	}
	if len(events) != 2 || events[0].Done || events[0].Action != plan.Replace || !events[1].Done || events[1].Err == nil {
		t.Errorf("events %+v; want the replace to start and to end with an error", events)
	}
}

// TestApplyFailedReplaceCountsDestroy: a replace whose new sandbox fails
// to start has still destroyed the old one.
func TestApplyFailedReplaceCountsDestroy(t *testing.T) {
	opts, _ := replaceWorld(t)
	opts.Save = (&saver{}).save
	opts.Build = func(context.Context, string) (*image.Result, error) {
		return nil, errors.New("the kernel package is corrupt")
	}
	res, err := Apply(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "the kernel package is corrupt") {
		t.Errorf("Apply error %v; want the build's", err)
	}
	if res.Destroyed != 1 || res.Replaced != 0 || res.Failed != 1 {
		t.Errorf("Apply = %+v; want 1 destroyed, 1 failed", res)
	}
}

// TestApplyCountsByAction: each change that lands counts under its
// action.
func TestApplyCountsByAction(t *testing.T) {
	st := &state.State{Resources: []*state.Resource{imageRes("old", "sha256:1"), imageRes("changed", "sha256:2")}}
	p := plan.Compute([]*state.Resource{imageRes("changed", "sha256:3"), imageRes("new", "sha256:4")}, st.Resources)
	res, err := Apply(context.Background(), Options{
		Config: &lang.Config{Dir: t.TempDir()},
		Plan:   p, State: st, Save: (&saver{}).save,
		Build: func(_ context.Context, name string) (*image.Result, error) { return &image.Result{Image: name}, nil },
	})
	if err != nil || res.Created != 1 || res.Replaced != 1 || res.Destroyed != 1 || res.Updated != 0 {
		t.Errorf("Apply = %+v, %v; want 1 created, 1 replaced, 1 destroyed", res, err)
	}
}
