package command

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// TestPsShowsAnUnhealthySandbox: a sandbox whose supervisor runs but
// says its guest agent does not answer shows as unhealthy, with the
// reason, in sbx ps (table and JSON), sbx status and sbx ps -a, never as
// running.
func TestPsShowsAnUnhealthySandbox(t *testing.T) {
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
	// The supervisor's answer, from a socket that stands in for its
	// control socket.
	status := supervisor.Status{Name: "box", State: supervisor.StateRunning, Pid: os.Getpid(), QEMUPid: 42,
		Agent: "did not answer a ping within 10s"}
	if b, err := json.Marshal(status); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(filepath.Join(sdir, supervisor.StatusFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(supervisor.Spec{Name: "box", ConfigDir: configDir, Image: &sandbox.Image{}})
	if err := os.WriteFile(filepath.Join(sdir, supervisor.SpecFile), spec, 0o600); err != nil {
		t.Fatal(err)
	}
	ctl := filepath.Join(sdir, supervisor.ControlFile)
	l, err := net.Listen("unix", ctl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	os.Chmod(ctl, 0o600)
	answer, _ := json.Marshal(status)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			bufio.NewReader(conn).ReadString('\n')
			conn.Write(append(answer, '\n'))
			conn.Close()
		}
	}()
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
		Runtime: &state.Runtime{Dir: sdir, Pid: os.Getpid(), QEMUPid: 42},
	}}}
	if err := lease.Save(st); err != nil {
		t.Fatal(err)
	}
	lease.Close()

	const why = "its guest agent did not answer a ping within 10s"
	code, out, errOut := runBounded(t, environ, "ps", configDir)
	if code != ExitOK || !strings.Contains(out, "box      unhealthy") || strings.Contains(out, "running") ||
		!strings.Contains(errOut, "sandbox.box is unhealthy: "+why) {
		t.Errorf("ps: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runBounded(t, environ, "ps", "-json", configDir)
	var list []sandboxStatus
	if err := json.Unmarshal([]byte(out), &list); code != ExitOK || err != nil || len(list) != 1 ||
		list[0].Status != "unhealthy" || !strings.HasPrefix(list[0].Unhealthy, why) || list[0].Gone != "" {
		t.Errorf("ps -json: code %d, %v, stdout %q, stderr %q", code, err, out, errOut)
	}
	code, out, errOut = runBounded(t, environ, "status", configDir, "box")
	if code != ExitOK || !strings.Contains(out, "status:      unhealthy ("+why) {
		t.Errorf("status: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runBounded(t, environ, "ps", "-a", "-json")
	var all []runtimeEntry
	if err := json.Unmarshal([]byte(out), &all); code != ExitOK || err != nil || len(all) != 1 ||
		all[0].Status != "unhealthy" || !strings.HasPrefix(all[0].Unhealthy, why) {
		t.Errorf("ps -a -json: code %d, %v, stdout %q, stderr %q", code, err, out, errOut)
	}
}
