package apply

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// Refresh checks every sandbox that st records as started against the
// processes that run it (supervisor.Inspect) and marks the ones that no
// longer run: their Runtime.Gone says why. A sandbox whose supervisor
// runs but whose guest agent does not answer counts as one that no longer
// runs, Runtime.Unhealthy saying so. A plan made against the refreshed
// state replaces them. Sandboxes found running get Gone
// cleared and their QEMU process id updated. Refresh changes only st.
//
// A sandbox is looked for in the supervisor directory sbx gives it
// (supervisor.SandboxDir under runtimeBase, for the configuration in
// configDir), not in the one st records: state is a file in the
// configuration's directory, which an untrusted checkout writes, so
// nothing is read from or sent to a directory it names. A sandbox
// recorded in another directory is marked gone, saying so; the process
// ids st records are hints that supervisor.Inspect verifies.
func Refresh(ctx context.Context, st *state.State, runtimeBase, configDir string) {
	if st == nil {
		return
	}
	var wg sync.WaitGroup
	for _, r := range st.Resources {
		if r.Sandbox == nil || r.Sandbox.Runtime == nil {
			continue
		}
		rt := r.Sandbox.Runtime
		name := r.Addr.Name
		wg.Go(func() {
			_, lv, err := InspectSandbox(ctx, runtimeBase, configDir, name, rt)
			if err != nil {
				rt.Gone, rt.Unhealthy = err.Error(), ""
				return
			}
			rt.Gone, rt.Unhealthy = lv.Gone, lv.Unhealthy
			if lv.Running && lv.Status != nil && lv.Status.QEMUPid != 0 {
				rt.QEMUPid = lv.Status.QEMUPid
			}
		})
	}
	wg.Wait()
}

// recordedElsewhere returns an error when rt records a supervisor
// directory other than dir, the one sbx gives the sandbox.
func recordedElsewhere(rt *state.Runtime, dir string) error {
	if rt.Dir != "" && filepath.Clean(rt.Dir) != dir {
		return fmt.Errorf("the state records its supervisor directory as %s, but sbx keeps it in %s", rt.Dir, dir)
	}
	return nil
}

// InspectSandbox reports on the sandbox name of the configuration in
// configDir that state records as started with rt. It looks in the
// supervisor directory sbx gives the sandbox (supervisor.SandboxDir under
// runtimeBase), which it returns, never in the one rt records: a
// sandbox recorded elsewhere is an error, and nothing is read from or
// sent to that other directory. rt's process ids are hints that
// supervisor.Inspect verifies.
func InspectSandbox(ctx context.Context, runtimeBase, configDir, name string, rt *state.Runtime) (string, supervisor.Liveness, error) {
	dir, err := supervisor.SandboxDir(runtimeBase, configDir, name)
	if err == nil {
		dir, err = filepath.Abs(dir)
	}
	if err == nil {
		err = recordedElsewhere(rt, dir)
	}
	if err != nil {
		return "", supervisor.Liveness{}, err
	}
	return dir, supervisor.Inspect(ctx, dir, rt.Pid, rt.QEMUPid), nil
}
