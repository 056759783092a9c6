package apply

import (
	"context"
	"sync"

	"github.com/sbx-dev/sbx/state"
	"github.com/sbx-dev/sbx/supervisor"
)

// Refresh checks every sandbox that st records as started against the
// processes that run it (supervisor.Inspect) and marks the ones that no
// longer run: their Runtime.Gone says why. A plan made against the
// refreshed state replaces them. Sandboxes found running get Gone
// cleared and their QEMU process id updated. Refresh changes only st.
func Refresh(ctx context.Context, st *state.State) {
	if st == nil {
		return
	}
	var wg sync.WaitGroup
	for _, r := range st.Resources {
		if r.Sandbox == nil || r.Sandbox.Runtime == nil {
			continue
		}
		rt := r.Sandbox.Runtime
		wg.Add(1)
		go func() {
			defer wg.Done()
			lv := supervisor.Inspect(ctx, rt.Dir, rt.Pid, rt.QEMUPid)
			rt.Gone = lv.Gone
			if lv.Running && lv.Status != nil && lv.Status.QEMUPid != 0 {
				rt.QEMUPid = lv.Status.QEMUPid
			}
		}()
	}
	wg.Wait()
}

// Inspect reports on one sandbox that state records as started; see
// supervisor.Inspect.
func Inspect(ctx context.Context, rt *state.Runtime) supervisor.Liveness {
	return supervisor.Inspect(ctx, rt.Dir, rt.Pid, rt.QEMUPid)
}
