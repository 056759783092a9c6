package supervisor

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/machine/qemu"
)

// TestInspectAndRemoveWithoutSupervisor covers what is left when a
// supervisor is killed: no control socket, a status file naming a dead
// supervisor and a QEMU that still runs. Inspect reports the orphan,
// Remove kills it and removes the directory, and a recorded supervisor or
// QEMU pid now used by an unrelated process (one whose command line
// names a file of the sandbox) is taken for neither: Inspect does not
// report it and Remove leaves it running.
func TestInspectAndRemoveWithoutSupervisor(t *testing.T) {
	dir, work := sandboxFixture(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	orphan := startStandIn(t, work, []string{"qemu-system-x86_64", "-c", "read x", "-chardev", qmpArg(filepath.Join(dir, "sbx-1234"))}, nil)
	stranger := startStandIn(t, work, []string{"sh", "-c", "read x", filepath.Join(dir, "sbx-1234", "qmp.sock")}, nil)
	if err := writeStatus(dir, Status{Name: "box", State: StateRunning, Pid: dead.Process.Pid, QEMUPid: orphan.pid}); err != nil {
		t.Fatal(err)
	}

	lv := Inspect(context.Background(), dir, dead.Process.Pid, orphan.pid)
	if lv.Running || lv.OrphanQEMU != orphan.pid || !strings.Contains(lv.Gone, "has exited") || !strings.Contains(lv.Gone, "still runs") {
		t.Errorf("Inspect: %+v; want gone, naming the orphaned QEMU", lv)
	}
	if lv := Inspect(context.Background(), dir, dead.Process.Pid, stranger.pid); lv.OrphanQEMU != 0 {
		t.Errorf("Inspect took process %d, which is not QEMU, for the sandbox's QEMU", stranger.pid)
	}
	if lv := Inspect(context.Background(), dir, stranger.pid, stranger.pid); lv.OrphanQEMU != 0 || !strings.Contains(lv.Gone, "has exited") {
		t.Errorf("Inspect took process %d, which is neither, for the sandbox's supervisor or QEMU: %+v", stranger.pid, lv)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The orphan is found in the status file.
	if err := Remove(ctx, dir, stranger.pid, stranger.pid); err != nil {
		t.Fatal(err)
	}
	if !runs(stranger.pid) {
		t.Errorf("Remove killed process %d, which is not the sandbox's", stranger.pid)
	}
	if !waitExit(orphan.pid) {
		t.Errorf("the orphaned QEMU %d (found in the status file) still runs after Remove", orphan.pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there after Remove (%v)", dir, err)
	}
	if lv := Inspect(context.Background(), dir, 0, 0); lv.Running || lv.Gone != "it has no supervisor" {
		t.Errorf("Inspect of a removed directory: %+v", lv)
	}
}

func TestIsSandboxArgv(t *testing.T) {
	const dir = "/run/sbx/abc/box"
	cases := []struct {
		args []string
		role procRole
		want bool
	}{
		{[]string{"/usr/bin/sbx", "supervise", dir}, roleSupervisor, true},
		{[]string{"/usr/bin/sbx", "supervise", dir + "/"}, roleSupervisor, false},
		{[]string{"/usr/bin/sbx", "supervise", dir + "-2"}, roleSupervisor, false},
		{[]string{"/usr/bin/sbx", "supervise", dir + "/sbx-1"}, roleSupervisor, false},
		{[]string{"/usr/bin/sbx", "supervise", dir, "x"}, roleSupervisor, false},
		{[]string{"sh", "-c", "x", "sbx", "supervise", dir}, roleSupervisor, false},
		{[]string{"/usr/bin/sbx", "run", dir}, roleSupervisor, false},
		{[]string{"tail", "-f", dir + "/sbx-1/console.log"}, roleSupervisor, false},
		{[]string{"qemu", "-chardev", "socket,id=qmp,path=" + dir + "/sbx-1/qmp.sock,server=on,wait=off"}, roleQEMU, true},
		{[]string{"qemu", "-chardev", "socket,id=qmp,path=" + dir + "/sbx-1/qmp.sock,server=on,wait=off"}, roleSupervisor, false},
		{[]string{"/usr/bin/sbx", "supervise", dir}, roleQEMU, false},
		{[]string{"qemu", "-chardev", "socket,id=qmp,path=" + dir + "-2/sbx-1/qmp.sock,server=on,wait=off"}, roleQEMU, false},
		{[]string{"qemu", "-chardev", "socket,id=qmp,path=" + dir + "/sbx-1/agent.sock,server=on,wait=off"}, roleQEMU, false},
		{[]string{"qemu", "-chardev", "socket,id=qmp,path=" + dir + "/sbx-x/qmp.sock,server=on,wait=off"}, roleQEMU, false},
		{[]string{"qemu", "-chardev", "socket,id=qmp,path=" + dir + "/a/sbx-1/qmp.sock,server=on,wait=off"}, roleQEMU, false},
		{[]string{"qemu", "-chardev", "socket,id=qmp,path=" + dir + "/sbx-1/../sbx-2/qmp.sock,server=on,wait=off"}, roleQEMU, false},
		{[]string{"qemu", "-chardev", "socket,id=qmp,path=" + dir + "/sbx-1/qmp.sock,server=on,wait=on"}, roleQEMU, false},
		{[]string{"qemu", "-x", "socket,id=qmp,path=" + dir + "/sbx-1/qmp.sock,server=on,wait=off"}, roleQEMU, false},
		{[]string{"socat", dir + "/sbx-1/qmp.sock"}, roleQEMU, false},
		{[]string{"sleep", "600"}, roleQEMU, false},
	}
	for _, c := range cases {
		if got := isSandboxArgv(c.args, dir, c.role); got != c.want {
			t.Errorf("isSandboxArgv(%q, %s) = %v, want %v", c.args, c.role, got, c.want)
		}
	}
}

// TestIsSandboxArgvOfQEMU checks the QEMU argument vector recognized
// against the one internal/machine/qemu builds, commas in the path included.
func TestIsSandboxArgvOfQEMU(t *testing.T) {
	for _, dir := range []string{"/run/sbx/abc/box", "/run/sbx/a,b/box"} {
		var spec qemu.VMSpec
		var host qemu.Host
		mdir := filepath.Join(dir, "sbx-4242")
		if err := json.Unmarshal([]byte(`{"name": "sbx-box", "platform": {"OS": "linux", "Architecture": "amd64"}, "cpus": 1,
			"memory_bytes": 536870912, "kernel": "/images/vmlinuz", "qmp_socket": "`+mdir+`/qmp.sock", "agent_socket": "`+mdir+`/agent.sock"}`), &spec); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(`{"os": "linux", "arch": "amd64", "accels": ["tcg"],
			"qemu": {"amd64": {"path": "/usr/bin/qemu-system-x86_64", "version": {"major": 8, "minor": 2, "micro": 0}}}}`), &host); err != nil {
			t.Fatal(err)
		}
		argv, err := qemu.Command(spec, host)
		if err != nil {
			t.Fatal(err)
		}
		if !isSandboxArgv(argv, dir, roleQEMU) {
			t.Errorf("QEMU's argument vector for %s is not recognized:\n%q", dir, argv)
		}
		if isSandboxArgv(argv, dir+"x", roleQEMU) || isSandboxArgv(argv, mdir, roleQEMU) {
			t.Errorf("QEMU's argument vector for %s is taken for another directory's", dir)
		}
	}
}
