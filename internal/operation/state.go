package operation

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/state"
)

// StateReadOptions say how a plan reads the state.
type StateReadOptions struct {
	Lock    bool          // take the state lock (-lock)
	Timeout time.Duration // how long to wait for it (-lock-timeout)
	Refresh bool          // check the recorded sandboxes (-refresh)
}

// ReadState reads the state of dir for a plan, which changes nothing and
// so writes nothing in dir:
//
//   - with opts.Lock unset (-lock=false), without the state lock;
//   - where dir has no .sbx, without the lock too: there is no state to
//     protect, and taking the lock would create .sbx;
//   - otherwise under the state lock, unless the lock file cannot be
//     created or opened for writing because the file system is read-only
//     or the user may not write there: then the state is read without
//     the lock, and a note to h says so.
//
// The returned lease is nil when no lock was taken (Close on a nil lease
// does nothing).
func ReadState(ctx context.Context, h Hooks, dir string, opts StateReadOptions) (*state.Lease, *state.State, diags.Diagnostics) {
	unlocked := func() (*state.Lease, *state.State, diags.Diagnostics) {
		st, err := state.Load(dir)
		if err != nil {
			return nil, nil, diags.Diagnostics{diags.Sourceless(diags.Error, "Cannot read the state", err.Error())}
		}
		return nil, st, nil
	}
	if !opts.Lock {
		return unlocked()
	}
	if _, err := os.Lstat(filepath.Join(dir, state.Dir)); errors.Is(err, fs.ErrNotExist) {
		return unlocked()
	}
	lctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	lease, err := state.Lock(lctx, dir)
	if err != nil {
		if errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrPermission) {
			h.Message(fmt.Sprintf("Note: the state lock cannot be taken (%v); reading the state without it.\n", err))
			return unlocked()
		}
		return nil, nil, diags.Diagnostics{lockError(ctx, err, opts.Timeout)}
	}
	st, err := lease.Load()
	if err != nil {
		lease.Close()
		return nil, nil, diags.Diagnostics{diags.Sourceless(diags.Error, "Cannot read the state", err.Error())}
	}
	return lease, st, nil
}

// LockState takes the state lock of dir, waiting at most timeout for
// another sbx run, and reads the state, as apply and destroy do.
func LockState(ctx context.Context, dir string, timeout time.Duration) (*state.Lease, *state.State, diags.Diagnostics) {
	lease, ds := LockOnly(ctx, dir, timeout)
	if ds.HasErrors() {
		return nil, nil, ds
	}
	st, err := lease.Load()
	if err != nil {
		lease.Close()
		return nil, nil, diags.Diagnostics{diags.Sourceless(diags.Error, "Cannot read the state", err.Error())}
	}
	return lease, st, nil
}

// LockOnly takes the state lock of dir, waiting at most timeout for
// another sbx run, without reading the state.
func LockOnly(ctx context.Context, dir string, timeout time.Duration) (*state.Lease, diags.Diagnostics) {
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	lease, err := state.Lock(lctx, dir)
	if err != nil {
		return nil, diags.Diagnostics{lockError(ctx, err, timeout)}
	}
	return lease, nil
}

// lockError is the diagnostic of state.Lock's err, which waited at most
// timeout under ctx: when another run held the lock for all of timeout,
// it says how to wait longer (-lock-timeout).
func lockError(ctx context.Context, err error, timeout time.Duration) diags.Diagnostic {
	var held *state.HeldError
	if !errors.As(err, &held) {
		return diags.Sourceless(diags.Error, "Cannot lock the state", err.Error())
	}
	if ctx.Err() != nil {
		return diags.Sourceless(diags.Error, "Cannot lock the state", fmt.Sprintf("%v; stopped waiting for it: %v.", held, ctx.Err()))
	}
	return diags.Sourceless(diags.Error, "Cannot lock the state",
		fmt.Sprintf("%v and did not release it within -lock-timeout (%v). Wait for it to finish and try again, or wait longer for it with -lock-timeout (as in -lock-timeout=5m).", held, timeout))
}
