package command

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// craftedState writes the state file an untrusted checkout can carry: a
// sandbox "box" recorded as running in runtimeDir as process pid, with
// QEMU qemuPid.
func craftedState(t *testing.T, configDir, runtimeDir string, pid, qemuPid int) {
	t.Helper()
	writeFile(t, filepath.Join(configDir, ".sbx", "state.json"), `{
  "format_version": 1,
  "lineage": "6f1c2a9e-3b5d-4e8f-9a7b-0c1d2e3f4a5b",
  "serial": 3,
  "resources": [
    {
      "address": "sandbox.box",
      "sandbox": {
        "image": "agent",
        "image_hash": "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "cpus": 1,
        "memory": 536870912,
        "policy": {},
        "policy_hash": "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
        "runtime": {"dir": `+strconv.Quote(runtimeDir)+`, "pid": `+strconv.Itoa(pid)+`, "qemu_pid": `+strconv.Itoa(qemuPid)+`}
      }
    }
  ]
}
`)
}

// destroyWorld is a configuration directory and a private runtime base
// for destroy to run against.
func destroyWorld(t *testing.T) (configDir string, f *fixture) {
	t.Helper()
	configDir = t.TempDir()
	base := t.TempDir()
	f = &fixture{t: t, environ: []string{"PATH=" + os.Getenv("PATH"), "SBX_RUNTIME_DIR=" + base, "HOME=" + t.TempDir()}}
	return configDir, f
}

// sandboxDirOf returns the supervisor directory sbx gives sandbox "box"
// of configDir in f's environment.
func sandboxDirOf(t *testing.T, f *fixture, configDir string) string {
	t.Helper()
	abs, err := filepath.Abs(configDir)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := supervisor.SandboxDir(supervisor.RuntimeBase(f.environ), abs, "box")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDestroyCraftedRuntimeDir plays a checkout whose state records the
// sandbox's supervisor directory as a directory of the user's, holding
// files with the names sbx makes in a supervisor directory and others.
// destroy refuses, naming the directory, and leaves it whole.
func TestDestroyCraftedRuntimeDir(t *testing.T) {
	configDir, f := destroyWorld(t)
	victim := t.TempDir()
	files := map[string]string{
		"thesis.tex":              "years of work\n",
		"sub/data.csv":            "1,2,3\n",
		supervisor.SpecFile:       "{}\n",
		supervisor.StatusFile:     `{"name": "box", "state": "failed", "pid": 1}` + "\n",
		supervisor.LogFile:        "log\n",
		supervisor.ConsoleFile:    "console\n",
		"sbx-1/root.qcow2":        "disk\n",
		"sbx-1/console.log":       "console\n",
		supervisor.ControlFile:    "not a socket\n",
		supervisor.LogFile + ".1": "old log\n",
	}
	for name, content := range files {
		writeFile(t, filepath.Join(victim, name), content)
	}
	craftedState(t, configDir, victim, 0, 0)

	r := f.run("destroy", "-auto-approve", "-no-color", configDir)
	if r.code != ExitError || !strings.Contains(r.stderr, victim) {
		t.Errorf("destroy with a state naming %s: want exit %d and an error naming it, got:\n%s", victim, ExitError, r)
	}
	for name, content := range files {
		if b, err := os.ReadFile(filepath.Join(victim, name)); err != nil || string(b) != content {
			t.Errorf("%s after destroy: %q, %v; want it untouched", name, b, err)
		}
	}
	// The sandbox stays in state: nothing was done to it.
	st, err := state.Load(configDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Resources) != 1 {
		t.Errorf("state after a refused destroy holds %d resources, want the sandbox", len(st.Resources))
	}
}

// TestDestroyCraftedPids plays a checkout whose state records the
// sandbox in the directory sbx would give it, but with the process ids
// of the user's unrelated processes whose command lines name that
// directory: a tail of a file in it as the supervisor, and as QEMU the
// leader of a process group naming QEMU's monitor socket in it. destroy
// succeeds and kills none of them.
func TestDestroyCraftedPids(t *testing.T) {
	configDir, f := destroyWorld(t)
	dir := sandboxDirOf(t, f, configDir)

	tail := exec.Command("tail", "-f", "/dev/null", filepath.Join(dir, "supervisor.log"))
	tail.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	tailDone := make(chan struct{})
	go func() { tail.Wait(); close(tailDone) }()
	t.Cleanup(func() { syscall.Kill(-tail.Process.Pid, syscall.SIGKILL); <-tailDone })

	leader := exec.Command("sh", "-c", "sleep 600 & echo $!; read x", filepath.Join(dir, "sbx-1", "qmp.sock"))
	leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := leader.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := leader.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	leaderDone := make(chan struct{})
	go func() { io.Copy(io.Discard, stdout); leader.Wait(); close(leaderDone) }()
	child, _ := strconv.Atoi(strings.TrimSpace(line))
	t.Cleanup(func() {
		syscall.Kill(-leader.Process.Pid, syscall.SIGKILL)
		stdin.Close()
		<-leaderDone
	})
	if err != nil || child == 0 {
		t.Fatalf("the group leader did not print its child's pid: %q, %v", line, err)
	}

	craftedState(t, configDir, dir, tail.Process.Pid, leader.Process.Pid)
	f.mustRun(ExitOK, "destroy", "-auto-approve", "-no-color", configDir)
	for what, pid := range map[string]int{"tail -f naming the directory": tail.Process.Pid, "the group leader": leader.Process.Pid, "its child": child} {
		if !alive(pid) {
			t.Errorf("destroy killed %s (pid %d), which is not the sandbox's", what, pid)
		}
	}
}

// TestDestroyStaleSandbox plays what a killed supervisor leaves: its
// directory as Spawn and the machine made it, and a supervisor that no
// longer answers, run as "<binary> supervise DIR". destroy kills it and
// removes the directory.
func TestDestroyStaleSandbox(t *testing.T) {
	configDir, f := destroyWorld(t)
	dir := sandboxDirOf(t, f, configDir)
	for _, name := range []string{supervisor.SpecFile, supervisor.StatusFile, supervisor.LogFile, "sbx-77/console.log", "sbx-77/root.qcow2"} {
		writeFile(t, filepath.Join(dir, name), "x\n")
	}
	pid, done := standInSupervisor(t, dir)
	craftedState(t, configDir, dir, pid, 0)
	f.mustRun(ExitOK, "destroy", "-auto-approve", "-no-color", configDir)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Errorf("the stale supervisor (pid %d) still runs after destroy", pid)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there after destroy (%v)", dir, err)
	}
}

// TestExecIgnoresCraftedRuntimeDir plays a checkout whose state records
// the sandbox's supervisor directory as one where something else
// listens. sbx exec, cp and logs look only where sbx keeps the sandbox:
// nothing connects to the socket the state names.
func TestExecIgnoresCraftedRuntimeDir(t *testing.T) {
	configDir, f := destroyWorld(t)
	elsewhere, err := os.MkdirTemp("", "sbx-else") // short: it holds a socket
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(elsewhere) })
	connected := listenForDial(t, filepath.Join(elsewhere, supervisor.SocketFile))
	craftedState(t, configDir, elsewhere, 0, 0)
	local := filepath.Join(t.TempDir(), "secret.txt")
	writeFile(t, local, "secret\n")
	f.run("exec", configDir, "box", "--", "true")
	f.run("cp", configDir, local, "box:/tmp/secret.txt")
	select {
	case <-connected:
		t.Errorf("sbx connected to %s, the socket a crafted state named", filepath.Join(elsewhere, supervisor.SocketFile))
	default:
	}
}

// TestPsIgnoresCraftedRuntimeDir: ps and status ask no control socket a
// crafted state names, and show the directory sbx keeps the sandbox in.
func TestPsIgnoresCraftedRuntimeDir(t *testing.T) {
	configDir, f := destroyWorld(t)
	elsewhere, err := os.MkdirTemp("", "sbx-else") // short: it holds a socket
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(elsewhere) })
	connected := listenForDial(t, filepath.Join(elsewhere, supervisor.ControlFile))
	craftedState(t, configDir, elsewhere, 0, 0)
	ps := f.run("ps", "-json", configDir)
	status := f.run("status", "-json", configDir, "box")
	select {
	case <-connected:
		t.Errorf("sbx connected to %s, the control socket a crafted state named", filepath.Join(elsewhere, supervisor.ControlFile))
	default:
	}
	for _, r := range []result{ps, status} {
		if strings.Contains(r.stdout, `"dir": "`+elsewhere) {
			t.Errorf("the crafted directory %s is shown as the sandbox's:\n%s", elsewhere, r)
		}
	}
}

// listenForDial listens on the unix socket path until the test ends; the
// channel receives once something connects to it.
func listenForDial(t *testing.T, path string) <-chan struct{} {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	connected := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case connected <- struct{}{}:
			default:
			}
			c.Close()
		}
	}()
	return connected
}
