package command

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// These tests play what an apply that failed or was interrupted, or a
// state file that broke, leaves in the runtime directory: supervisor
// directories as Spawn makes them, and supervisors that still run, as
// processes with exactly the argument vector sbx gives a supervisor. No
// VM is needed: destroy finds and stops them as it would real ones.

// sandboxDirFor returns the supervisor directory sbx gives sandbox name
// of configDir in f's environment.
func sandboxDirFor(t *testing.T, f *fixture, configDir, name string) string {
	t.Helper()
	abs, err := filepath.Abs(configDir)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := supervisor.SandboxDir(supervisor.RuntimeBase(f.environ), abs, name)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// leaveSandboxDir writes what Spawn leaves in the supervisor directory of
// sandbox name: its spec, a status file naming supervisor pid (0: none)
// with an error, and a log. It returns the directory.
func leaveSandboxDir(t *testing.T, f *fixture, configDir, name string, pid int) string {
	t.Helper()
	dir := sandboxDirFor(t, f, configDir, name)
	abs, _ := filepath.Abs(configDir)
	spec, err := json.Marshal(supervisor.Spec{Name: name, ConfigDir: abs, Image: &sandbox.Image{Image: "agent"}, CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	status, err := json.Marshal(supervisor.Status{Name: name, State: supervisor.StateFailed, Pid: pid, Error: "no QEMU system emulator found"})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, supervisor.SpecFile), string(spec)+"\n")
	writeFile(t, filepath.Join(dir, supervisor.StatusFile), string(status)+"\n")
	writeFile(t, filepath.Join(dir, supervisor.LogFile), "starting\n")
	return dir
}

// standInSupervisor starts a process with exactly the argument vector of
// dir's supervisor ("<binary> supervise DIR": a shell running the script
// "supervise", which waits on its input). The channel closes when it has
// exited.
func standInSupervisor(t *testing.T, dir string) (int, <-chan struct{}) {
	t.Helper()
	work := t.TempDir()
	writeFile(t, filepath.Join(work, supervisor.Verb), "read x\n")
	sup := &exec.Cmd{Path: "/bin/sh", Args: []string{"/usr/local/bin/sbx", supervisor.Verb, dir}, Dir: work}
	sup.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := sup.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { sup.Wait(); close(done) }()
	t.Cleanup(func() { syscall.Kill(-sup.Process.Pid, syscall.SIGKILL); stdin.Close(); <-done })
	return sup.Process.Pid, done
}

// exited waits up to 10 s for done to close.
func exited(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

// saveState saves st as the configuration's state under its lock.
func saveState(t *testing.T, configDir string, st *state.State) {
	t.Helper()
	l, err := state.Lock(context.Background(), configDir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Save(st); err != nil {
		t.Fatal(err)
	}
}

// psAll returns the sandboxes "ps -a" lists, as "NAME STATUS CONFIG".
func psAll(t *testing.T, f *fixture) []string {
	t.Helper()
	r := f.mustRun(ExitOK, "ps", "-a", "-json")
	var list []runtimeEntry
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("ps -a -json: %v\n%s", err, r)
	}
	var out []string
	for _, e := range list {
		out = append(out, e.Sandbox+" "+e.Status+" "+e.ConfigDir)
	}
	return out
}

// TestDestroyCleansWhatAFailedApplyLeft plays two sandboxes an apply
// left behind without recording them in state: "box", whose supervisor
// still runs (sbx was killed while it started), and "web", whose start
// failed. "ps -a" shows both; destroy finds each by name and without
// one, stops the supervisor, removes the directories, and counts them;
// afterwards "ps -a" shows neither.
func TestDestroyCleansWhatAFailedApplyLeft(t *testing.T) {
	configDir, f := destroyWorld(t)
	saveState(t, configDir, &state.State{})
	box := leaveSandboxDir(t, f, configDir, "box", 0)
	pid, done := standInSupervisor(t, box)
	leaveSandboxDir(t, f, configDir, "box", pid) // its status names it
	web := leaveSandboxDir(t, f, configDir, "web", 0)
	if got := psAll(t, f); len(got) != 2 || !strings.HasPrefix(got[0], "box gone "+configDir) || !strings.HasPrefix(got[1], "web gone "+configDir) {
		t.Fatalf("ps -a before destroy lists %q; want box and web, gone", got)
	}

	if r := f.run("destroy", "-auto-approve", "-no-color", configDir, "nosuch"); r.code != ExitError || !strings.Contains(r.stderr, "box, web") {
		t.Errorf("destroy of an unknown sandbox: want exit %d and the sandboxes there are listed, got:\n%s", ExitError, r)
	}

	r := f.mustRun(ExitOK, "destroy", "-auto-approve", "-no-color", configDir, "box")
	for _, want := range []string{"sandbox.box will be destroyed because it is not in the state", "Destroy complete! 1 destroyed."} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("destroy box does not say %q:\n%s", want, r)
		}
	}
	if !exited(done) {
		t.Errorf("box's supervisor (pid %d) still runs after destroy", pid)
	}
	if _, err := os.Lstat(box); !os.IsNotExist(err) {
		t.Errorf("%s is still there after destroy (%v)", box, err)
	}
	if _, err := os.Lstat(web); err != nil {
		t.Errorf("destroy box removed web's directory: %v", err)
	}

	r = f.mustRun(ExitOK, "destroy", "-auto-approve", "-no-color", configDir)
	if !strings.Contains(r.stdout, "Destroy complete! 1 destroyed.") {
		t.Errorf("destroy does not count web:\n%s", r)
	}
	if got := psAll(t, f); len(got) != 0 {
		t.Errorf("ps -a after destroy lists %q", got)
	}
	r = f.mustRun(ExitOK, "destroy", "-auto-approve", "-no-color", configDir)
	if !strings.Contains(r.stdout, "Nothing to destroy") {
		t.Errorf("destroy with nothing left:\n%s", r)
	}
}

// TestDestroyWithCorruptState plays a state file broken while a sandbox
// runs. Every command refuses it, naming the backup of the previous
// state (its serial) and "destroy -orphans"; destroy -orphans stops the
// sandbox and removes its directory without reading the state, and
// leaves the state file alone; the backup, copied back, is read again.
func TestDestroyWithCorruptState(t *testing.T) {
	configDir, f := destroyWorld(t)
	dir := leaveSandboxDir(t, f, configDir, "box", 0)
	pid, done := standInSupervisor(t, dir)
	leaveSandboxDir(t, f, configDir, "box", pid)
	a := addrs.SandboxRef("box")
	st := &state.State{Resources: []*state.Resource{{Addr: a, Sandbox: &state.SandboxAttrs{Image: "agent", ImageHash: "sha256:1", CPUs: 1,
		Runtime: &state.Runtime{Dir: dir, Pid: pid}}}}}
	saveState(t, configDir, st)
	saveState(t, configDir, st) // serial 2; the backup holds serial 1
	corrupt := "{\n  \"format_version\": 1,\n<<<<<<< HEAD\n"
	writeFile(t, state.Path(configDir), corrupt)
	backup := filepath.Join(configDir, ".sbx", state.BackupFileName)

	for _, args := range [][]string{{"destroy", "-auto-approve", "-no-color", configDir}, {"ps", configDir}} {
		r := f.run(args...)
		for _, want := range []string{state.Path(configDir) + ":3:1 is not valid", "(serial 1) is in " + backup, "sbx destroy -orphans " + configDir} {
			if r.code != ExitError || !strings.Contains(r.stderr, want) {
				t.Errorf("sbx %s with a corrupt state: want exit %d and an error saying %q, got:\n%s", args[0], ExitError, want, r)
			}
		}
	}
	select {
	case <-done:
		t.Fatal("the sandbox's supervisor was stopped by a refused command")
	default:
	}

	r := f.mustRun(ExitOK, "destroy", "-orphans", "-auto-approve", "-no-color", configDir)
	if !strings.Contains(r.stdout, "Destroy complete! 1 destroyed.") || !strings.Contains(r.stderr, "was not read or changed") {
		t.Errorf("destroy -orphans:\n%s", r)
	}
	if !exited(done) {
		t.Errorf("the sandbox's supervisor (pid %d) still runs after destroy -orphans", pid)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there after destroy -orphans (%v)", dir, err)
	}
	if got := string(readFile(t, state.Path(configDir))); got != corrupt {
		t.Errorf("destroy -orphans changed the state file: %q", got)
	}

	// The way back the error named.
	writeFile(t, state.Path(configDir), string(readFile(t, backup)))
	back, err := state.Load(configDir)
	if err != nil || back.Serial != 1 || back.Lookup(a) == nil {
		t.Fatalf("the backup copied back: %+v, %v; want serial 1 recording %s", back, err, a)
	}
	r = f.mustRun(ExitOK, "ps", "-json", configDir)
	if !strings.Contains(r.stdout, `"status": "gone"`) {
		t.Errorf("ps after the backup was copied back does not show box gone:\n%s", r)
	}
}

// TestDestroyGoneConfig: a configuration directory
// deleted while its sandbox ran leaves the sandbox reachable by the path
// it was started from.
func TestDestroyGoneConfig(t *testing.T) {
	parent, f := destroyWorld(t)
	configDir := filepath.Join(parent, "proj")
	if err := os.Mkdir(configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := leaveSandboxDir(t, f, configDir, "box", 0)
	pid, done := standInSupervisor(t, dir)
	leaveSandboxDir(t, f, configDir, "box", pid)
	if err := os.RemoveAll(configDir); err != nil {
		t.Fatal(err)
	}
	if r := f.run("destroy", "-orphans", "-auto-approve", "-no-color"); r.code != ExitError || !strings.Contains(r.stderr, "-orphans needs the configuration's directory") {
		t.Errorf("destroy -orphans without a directory: want exit %d, got:\n%s", ExitError, r)
	}
	r := f.mustRun(ExitOK, "destroy", "-orphans", "-auto-approve", "-no-color", configDir, "box")
	if !strings.Contains(r.stdout, "Destroy complete! 1 destroyed.") {
		t.Errorf("destroy -orphans of a deleted configuration:\n%s", r)
	}
	if !exited(done) {
		t.Errorf("the sandbox's supervisor (pid %d) still runs after destroy -orphans", pid)
	}
	if _, err := os.Lstat(configDir); !os.IsNotExist(err) {
		t.Errorf("destroy -orphans made %s again (%v)", configDir, err)
	}
}

// TestDestroyAfterInterruptedApply: an apply interrupted while its
// sandbox boots leaves no process, and the state does not record the
// sandbox; what it leaves in the runtime directory, which "ps -a" lists,
// "destroy DIR box" removes.
func TestDestroyAfterInterruptedApply(t *testing.T) {
	w := newWorld(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Interrupt once the supervisor has started booting.
		for ctx.Err() == nil {
			if len(processesUnder(w.runtime)) >= 2 { // supervisor and QEMU
				cancel()
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	if code, out, _ := w.sbxContext(ctx, nil, "apply", "-auto-approve", w.dir); code != ExitInterrupted {
		t.Fatalf("apply: exit %d, want %d:\n%s", code, ExitInterrupted, out)
	}
	ps := func() string {
		code, out, stderr := w.sbx(nil, "ps", "-a", "-json")
		if code != ExitOK {
			t.Fatalf("ps -a: exit %d: %s", code, stderr)
		}
		return out
	}
	dir, err := supervisor.SandboxDir(w.runtime, w.dir, "box")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); err != nil {
		t.Skipf("the interrupted apply left no runtime directory (%v): nothing to destroy", err)
	}
	if out := ps(); !strings.Contains(out, `"sandbox": "box"`) {
		t.Errorf("ps -a does not list what the interrupted apply left in %s:\n%s", dir, out)
	}
	code, out, stderr := w.sbx(nil, "destroy", "-auto-approve", "-no-color", w.dir, "box")
	if code != ExitOK || !strings.Contains(out, "not in the state") || !strings.Contains(out, "Destroy complete! 1 destroyed.") {
		t.Errorf("destroy box after the interrupted apply: exit %d\n%s%s", code, out, stderr)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there after destroy (%v)", dir, err)
	}
	if out := ps(); strings.TrimSpace(out) != "[]" {
		t.Errorf("ps -a after destroy:\n%s", out)
	}
}
