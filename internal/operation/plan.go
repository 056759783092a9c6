package operation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/apply"
	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"github.com/sbx-dev/sbx/lang"
)

// PlanState plans cfg against the state in its directory, read as
// ReadState reads it, after checking the sandboxes it records and
// looking for those it does not (NotInState), unless opts.Refresh is
// unset; runtimeBase is where its sandboxes run
// (supervisor.RuntimeBase). Notes go to h. The plan's mount reports are
// not filled in: the caller inspects the checkout as it needs.
func PlanState(ctx context.Context, h Hooks, cfg *lang.Config, lock *lockfiles.Lock, opts StateReadOptions, runtimeBase string) (*plan.Plan, diags.Diagnostics) {
	lease, st, ds := ReadState(ctx, h, cfg.Dir, opts)
	if ds.HasErrors() {
		return nil, ds
	}
	defer lease.Close()
	if opts.Refresh {
		apply.Refresh(ctx, st, runtimeBase, cfg.Dir)
	}
	desired, hd := plan.Desired(cfg, lock)
	ds = ds.Append(hd)
	if ds.HasErrors() {
		return nil, ds
	}
	p := plan.FromState(desired, st)
	if opts.Refresh {
		ds = ds.Append(planRuntime(ctx, p, st, runtimeBase, cfg.Dir))
	}
	return p, ds
}

// SamePlan checks that the plan computed now is the one saved: same state
// and same changes. The saved plan's mount reports are not compared (they
// describe the checkout when it was made).
func SamePlan(saved, now *plan.Plan) error {
	if saved.Against != "state" {
		return fmt.Errorf("it compares with %s, not with the state", saved.Against)
	}
	if saved.StateLineage != now.StateLineage || saved.StateSerial != now.StateSerial {
		return fmt.Errorf("it was made against state %s serial %d; the state is now %s serial %d",
			orNone(saved.StateLineage), saved.StateSerial, orNone(now.StateLineage), now.StateSerial)
	}
	s, n := *saved, *now
	s.Mounts, n.Mounts = nil, nil
	s.Secrets, n.Secrets = nil, nil
	a, err := s.MarshalJSON()
	if err != nil {
		return err
	}
	b, err := n.MarshalJSON()
	if err != nil {
		return err
	}
	if !bytes.Equal(a, b) {
		return errors.New("the configuration, the lock or the running sandboxes changed since it was saved")
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// Section is diagnostics about one thing, with the sources their snippets
// come from and, where they are not about the configuration planned, a
// heading naming what they are about ("In the configuration at main:").
type Section struct {
	Heading string
	Files   map[string]*hcl.File
	Diags   diags.Diagnostics
}

// PlanAgainst plans side's configuration against another revision of it
// (sbx plan -against REV): rev is a directory, or a git revision of the
// repository holding dir (AgainstDir), loaded with load and read with its
// own lock file. A revision with no lock file is compared unlocked, one
// where the configuration did not exist as empty (plan.AgainstSides).
// The plan is nil when it could not be made; the sections hold the
// diagnostics in the order they arose, the other revision's under a
// heading, and say why.
func PlanAgainst(ctx context.Context, environ []string, dir, rev string, load lang.Options, side plan.Side) (*plan.Plan, []Section) {
	cfg := side.Config
	otherDir, label, cleanup, err := AgainstDir(ctx, environ, dir, rev)
	if err != nil {
		return nil, []Section{{Diags: diags.Diagnostics{diags.Errorf("%v", err)}}}
	}
	defer cleanup()
	if otherDir == "" {
		// The configuration did not exist at that revision.
		p, hd := plan.AgainstSides(side, plan.Side{}, label)
		ds := diags.Diagnostics{}.Append(hd)
		if ds.HasErrors() {
			p = nil
		}
		return p, []Section{{Files: cfg.Sources, Diags: ds}}
	}
	var sections []Section
	other, hd := lang.Load(otherDir, load)
	if len(hd) > 0 {
		var files map[string]*hcl.File
		if other != nil {
			files = other.Sources
		}
		sections = append(sections, Section{Heading: fmt.Sprintf("In the configuration at %s:", label), Files: files, Diags: diags.Diagnostics{}.Append(hd)})
	}
	if hd.HasErrors() {
		return nil, sections
	}
	otherPath := filepath.Join(otherDir, lockfiles.FileName)
	otherLock, data, hd := pipeline.ReadLock(otherPath)
	if len(hd) > 0 {
		sections = append(sections, Section{Heading: fmt.Sprintf("In the lock file at %s:", label), Files: LockSources(data, otherPath), Diags: diags.Diagnostics{}.Append(hd)})
	}
	if hd.HasErrors() {
		return nil, sections
	}
	p, hd := plan.AgainstSides(side, plan.Side{Config: other, Lock: otherLock, Unlocked: data == nil}, label)
	sections = append(sections, Section{Files: withSources(cfg.Sources, other.Sources), Diags: diags.Diagnostics{}.Append(hd)})
	if hd.HasErrors() {
		p = nil
	}
	return p, sections
}

// planRuntime marks in p, a plan against st for the configuration in
// configDir, the sandboxes its runtime directory holds that st does not
// record (NotInState). A runtime directory that cannot be listed is a
// warning: the plan is then made from the state alone.
func planRuntime(ctx context.Context, p *plan.Plan, st *state.State, runtimeBase, configDir string) diags.Diagnostics {
	abs, err := filepath.Abs(configDir)
	var found []supervisor.Entry
	if err == nil {
		found, err = supervisor.ListConfig(ctx, runtimeBase, abs)
	}
	if err != nil {
		return diags.Diagnostics{diags.Sourceless(diags.Warning, "Cannot look for sandboxes that are not in the state",
			err.Error()+". The plan is made from the state alone: a sandbox that runs without being recorded there is not shown.")}
	}
	NotInState(p, st, found)
	return nil
}

// NotInState marks in p, a plan against st, each sandbox found in the
// runtime directory (supervisor.ListConfig) that st does not record — an
// apply that failed or was interrupted left it, or the state was
// restored from a backup older than it — saying "not in the state" and
// what apply does to it:
//
//   - one the configuration wants is created, as before, and its Reason
//     says that apply first stops the one that runs (or removes what the
//     gone one left), as apply does before it starts a sandbox;
//   - one it does not want is deleted (a change with no Before), and
//     apply stops it and removes its directory, as destroy would.
//
// The changes stay sorted by address.
func NotInState(p *plan.Plan, st *state.State, found []supervisor.Entry) {
	recorded := map[addrs.Ref]bool{}
	for _, r := range st.Resources {
		recorded[r.Addr] = true
	}
	byAddr := map[addrs.Ref]*plan.ResourceChange{}
	for _, c := range p.Changes {
		byAddr[c.Addr] = c
	}
	added := false
	for _, e := range found {
		addr := addrs.SandboxRef(e.Name)
		if recorded[addr] {
			continue
		}
		left := "left its runtime directory"
		if e.Liveness.Running {
			left = "runs"
		} else if e.Liveness.Gone != "" {
			left += " (" + e.Liveness.Gone + ")"
		}
		c := byAddr[addr]
		switch {
		case c == nil:
			how := "apply removes what it left"
			if e.Liveness.Running {
				how = "apply stops it and removes its directory"
			}
			p.Changes = append(p.Changes, &plan.ResourceChange{Addr: addr, Action: plan.Delete,
				Reason: "it is not in the state nor in the configuration, but it " + left + ": " + how})
			added = true
		case c.Action == plan.Create:
			how := "apply removes what it left first"
			if e.Liveness.Running {
				how = "apply stops that one first"
			}
			c.Reason = "it is not in the state, but a sandbox of that name " + left + ": " + how
		}
	}
	if added {
		slices.SortFunc(p.Changes, func(x, y *plan.ResourceChange) int {
			switch {
			case x.Addr.Less(y.Addr):
				return -1
			case y.Addr.Less(x.Addr):
				return 1
			}
			return 0
		})
	}
}
