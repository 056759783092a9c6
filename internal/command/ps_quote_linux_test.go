package command

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// TestPsQuotesGoneReason: a sandbox whose supervisor exited is shown as
// gone with the supervisor's last error, which quotes the VM's console,
// which the guest writes. sbx ps and sbx status print it escaped, its
// lines under a prefix.
func TestPsQuotesGoneReason(t *testing.T) {
	rt, err := os.MkdirTemp("", "sbx-rt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	configDir := t.TempDir()
	environ := []string{"SBX_RUNTIME_DIR=" + rt}
	sdir, err := supervisor.SandboxDir(supervisor.RuntimeBase(environ), configDir, "box")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		t.Fatal(err)
	}
	// A pid that provably is not the supervisor's any more.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	pid := dead.Process.Pid
	status, _ := json.Marshal(supervisor.Status{Name: "box", State: supervisor.StateStopped, Pid: pid,
		Error: "the machine exited on its own: the console's last lines:\n    " + hostileText})
	if err := os.WriteFile(filepath.Join(sdir, supervisor.StatusFile), status, 0o600); err != nil {
		t.Fatal(err)
	}
	lease, err := state.Lock(context.Background(), configDir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := lease.Load()
	if err != nil {
		t.Fatal(err)
	}
	a := addrs.SandboxRef("box")
	st.Resources = []*state.Resource{{Addr: a, Address: a.String(), Sandbox: &state.SandboxAttrs{
		Image: "agent", ImageHash: "sha256:" + strings.Repeat("a", 64), CPUs: 1, Memory: 1 << 30,
		Runtime: &state.Runtime{Dir: sdir, Pid: pid},
	}}}
	if err := lease.Save(st); err != nil {
		t.Fatal(err)
	}
	lease.Close()

	code, out, errOut := runBounded(t, environ, "ps", configDir)
	if code != ExitOK || !strings.Contains(errOut, "is gone") {
		t.Fatalf("ps: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	checkQuoted(t, "sbx ps", out+errOut)
	code, out, errOut = runBounded(t, environ, "status", configDir, "box")
	if code != ExitOK || !strings.Contains(out, "gone") {
		t.Fatalf("status: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	checkQuoted(t, "sbx status", out+errOut)
}
