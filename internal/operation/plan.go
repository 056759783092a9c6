package operation

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/sbx-dev/sbx/internal/apply"
	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/lang"
)

// PlanState plans cfg against the state in its directory, read as
// ReadState reads it, after checking the sandboxes it records (unless
// opts.Refresh is unset); runtimeBase is where its sandboxes run
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
	return plan.FromState(desired, st), ds
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
