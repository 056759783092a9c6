package supervisor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startNamed starts a process that runs until killed and whose command
// line names dir, as a supervisor's or its QEMU's does.
func startNamed(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 600", filepath.Join(dir, "sbx-1", "qemu"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // as QEMU runs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	return cmd
}

// TestInspectAndRemoveWithoutSupervisor covers what is left when a
// supervisor is killed: no control socket, a status file naming a dead
// supervisor and a QEMU that still runs. Inspect reports the orphan,
// Remove kills it and removes the directory, and a process that does not
// belong to the sandbox (a reused pid) is never killed.
func TestInspectAndRemoveWithoutSupervisor(t *testing.T) {
	base, err := os.MkdirTemp("", "sbx-insp")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	dir := filepath.Join(base, "box")
	if err := os.MkdirAll(filepath.Join(dir, "sbx-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "sbx-1", "console.log"), []byte("booted\n"), 0o600)

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	qemu := startNamed(t, dir)
	stranger := startNamed(t, filepath.Join(base, "other"))
	if err := writeStatus(dir, Status{Name: "box", State: StateRunning, Pid: dead.Process.Pid, QEMUPid: qemu.Process.Pid}); err != nil {
		t.Fatal(err)
	}

	lv := Inspect(context.Background(), dir, dead.Process.Pid, qemu.Process.Pid)
	if lv.Running || lv.OrphanQEMU != qemu.Process.Pid || !strings.Contains(lv.Gone, "has exited") || !strings.Contains(lv.Gone, "still runs") {
		t.Errorf("Inspect: %+v; want gone, naming the orphaned QEMU", lv)
	}
	// A recorded QEMU pid now used by an unrelated process is not the
	// sandbox's.
	if lv := Inspect(context.Background(), dir, dead.Process.Pid, stranger.Process.Pid); lv.OrphanQEMU != 0 {
		t.Errorf("Inspect took process %d, which does not name %s, for the sandbox's QEMU", stranger.Process.Pid, dir)
	}

	if err := Remove(context.Background(), dir, dead.Process.Pid, stranger.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if !processAlive(stranger.Process.Pid) {
		t.Errorf("Remove killed process %d, which is not the sandbox's", stranger.Process.Pid)
	}
	deadline := time.Now().Add(10 * time.Second)
	for processAlive(qemu.Process.Pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if processAlive(qemu.Process.Pid) {
		t.Errorf("the orphaned QEMU %d (found in the status file) still runs after Remove", qemu.Process.Pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there after Remove (%v)", dir, err)
	}
	if lv := Inspect(context.Background(), dir, 0, 0); lv.Running || lv.Gone != "it has no supervisor" {
		t.Errorf("Inspect of a removed directory: %+v", lv)
	}
}

func TestNamesDir(t *testing.T) {
	args := func(s ...string) [][]byte {
		var out [][]byte
		for _, a := range s {
			out = append(out, []byte(a))
		}
		return out
	}
	cases := []struct {
		args []string
		want bool
	}{
		{[]string{"/usr/bin/sbx", "supervise", "/run/sbx/abc/box"}, true},
		{[]string{"qemu", "-chardev", "socket,id=a,path=/run/sbx/abc/box/sbx-1/agent.sock"}, true},
		{[]string{"/usr/bin/sbx", "supervise", "/run/sbx/abc/box-2"}, false},
		{[]string{"qemu", "-chardev", "socket,path=/run/sbx/abc/box-2/sbx-1/agent.sock"}, false},
		{[]string{"sleep", "600"}, false},
	}
	for _, c := range cases {
		if got := namesDir(args(c.args...), "/run/sbx/abc/box"); got != c.want {
			t.Errorf("namesDir(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}
