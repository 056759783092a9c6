//go:build unix

package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// stateFD is the name QEMU keeps the state file's descriptor under
// between "getfd" and the migration that uses it.
const stateFD = "sbx-state"

// statePoll is how often Save and Restore ask QEMU how far they are.
const statePoll = 10 * time.Millisecond

// migrationCaps are the migration capabilities both ends set. With
// x-ignore-shared, RAM that lives in a shared file (VMSpec.Memory with
// Shared) is left out of the stream: the file is the RAM, and the
// stream only the devices' state.
var migrationCaps = map[string]any{"capabilities": []map[string]any{
	{"capability": "x-ignore-shared", "state": true},
}}

// Save writes the machine's device state to w as a migration stream and
// leaves QEMU stopped, its guest's RAM in the shared memory file the
// machine was started with (VMSpec.Memory): the two are a snapshot a
// machine started with Incoming is restored from. The root disk has
// been flushed when Save returns. The caller ends QEMU afterwards; its
// guest never runs again. ctx bounds the save.
func (p *Process) Save(ctx context.Context, w *os.File) error {
	p.agentReopened(ctx)
	if err := p.QMP.Execute(ctx, "migrate-set-capabilities", migrationCaps, nil); err != nil {
		return fmt.Errorf("saving the machine's state: %w", err)
	}
	if err := p.QMP.ExecuteWithFile(ctx, "getfd", map[string]any{"fdname": stateFD}, nil, w); err != nil {
		return fmt.Errorf("saving the machine's state: %w", err)
	}
	if err := p.QMP.Execute(ctx, "migrate", map[string]any{"uri": "fd:" + stateFD}, nil); err != nil {
		return fmt.Errorf("saving the machine's state: %w", err)
	}
	for {
		var info struct {
			Status    string `json:"status"`
			ErrorDesc string `json:"error-desc"`
		}
		if err := p.QMP.Execute(ctx, "query-migrate", nil, &info); err != nil {
			return fmt.Errorf("saving the machine's state: %w", err)
		}
		switch info.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			msg := info.ErrorDesc
			if msg == "" {
				msg = info.Status
			}
			return fmt.Errorf("saving the machine's state: %s", msg)
		}
		if err := p.pause(ctx); err != nil {
			return fmt.Errorf("saving the machine's state: %w", err)
		}
	}
}

// Restore loads a state Save wrote, from r, into a machine started with
// Incoming and the saved machine's RAM file (mapped private, so that the
// file is never written), and returns once its guest runs. When the
// state does not fit the machine, QEMU exits, and the error carries its
// message. ctx bounds the restore.
func (p *Process) Restore(ctx context.Context, r *os.File) error {
	if err := p.QMP.Execute(ctx, "migrate-set-capabilities", migrationCaps, nil); err != nil {
		return p.restoreError(err)
	}
	if err := p.QMP.ExecuteWithFile(ctx, "getfd", map[string]any{"fdname": stateFD}, nil, r); err != nil {
		return p.restoreError(err)
	}
	if err := p.QMP.Execute(ctx, "migrate-incoming", map[string]any{"uri": "fd:" + stateFD}, nil); err != nil {
		return p.restoreError(err)
	}
	for {
		var st struct {
			Status string `json:"status"`
		}
		if err := p.QMP.Execute(ctx, "query-status", nil, &st); err != nil {
			return p.restoreError(err)
		}
		switch st.Status {
		case "running":
			return nil
		case "inmigrate", "prelaunch":
		default:
			return fmt.Errorf("restoring the machine's state: QEMU is %s", st.Status)
		}
		if err := p.pause(ctx); err != nil {
			return p.restoreError(err)
		}
	}
}

// restoreError explains a failed restore: QEMU's own message when it
// exited (it does when the state does not load).
func (p *Process) restoreError(err error) error {
	select {
	case <-p.done:
	case <-time.After(time.Second):
	}
	select {
	case <-p.done:
		return fmt.Errorf("restoring the machine's state: QEMU exited: %s", p.failure())
	default:
		return fmt.Errorf("restoring the machine's state: %w", err)
	}
}

// pause waits statePoll, or until QEMU exits or ctx ends.
func (p *Process) pause(ctx context.Context) error {
	select {
	case <-time.After(statePoll):
		return nil
	case <-p.done:
		return errors.New("QEMU exited")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// agentPortDevice is the device id of the agent's port (Command names
// each port's device "v" and its chardev's id; the agent's is port0).
const agentPortDevice = "vport0"

// reopenWait bounds agentReopened.
const reopenWait = 3 * time.Second

// agentReopened waits until the guest has closed the agent's port and
// opened it again (QEMU's VSERPORT_CHANGE events), which the agent does
// when the host's connection ends: saved then, a resumed guest's agent
// waits for its new host's hello on a fresh open of the port, rather
// than reading it on the saved machine's connection. The caller closes
// its agent connection first. A guest that does neither within
// reopenWait is saved as it is (a resume then dials its agent again).
func (p *Process) agentReopened(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, reopenWait)
	defer cancel()
	closed := false
	for {
		select {
		case ev, ok := <-p.QMP.Events():
			if !ok {
				return
			}
			if ev.Name != "VSERPORT_CHANGE" {
				continue
			}
			var d struct {
				ID   string `json:"id"`
				Open bool   `json:"open"`
			}
			if json.Unmarshal(ev.Data, &d) != nil || d.ID != agentPortDevice {
				continue
			}
			if !d.Open {
				closed = true
			} else if closed {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
