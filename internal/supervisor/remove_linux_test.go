package supervisor

import (
	"bufio"
	"context"
	"github.com/sbx-dev/sbx/internal/procstat"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// standIn is a process started by a test to play a supervisor, a QEMU or
// an unrelated process: it waits on its standard input, a pipe the test
// holds, with the argument vector the test chose. child is the pid of a
// process it started in its own process group, or zero.
type standIn struct {
	pid, child int
}

// startStandIn starts a shell that waits on its standard input; argv is
// its whole argument vector as /proc shows it (argv[0] included), script
// what it runs (a file name in work, with argv[1] the script's name, or
// "-c" and the script). The shell leads its own process group, with
// cred its user when not nil. It is killed, with its group, when the
// test ends.
func startStandIn(t *testing.T, work string, argv []string, cred *syscall.Credential) standIn {
	t.Helper()
	return start(t, work, argv, cred, false)
}

// withChild is startStandIn for a script that first prints the pid of a
// child it starts ("sleep 600 & echo $!; read x").
func withChild(t *testing.T, work string, argv []string, cred *syscall.Credential) standIn {
	t.Helper()
	return start(t, work, argv, cred, true)
}

func start(t *testing.T, work string, argv []string, cred *syscall.Credential, child bool) standIn {
	t.Helper()
	cmd := &exec.Cmd{Path: "/bin/sh", Args: argv, Dir: work}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := standIn{pid: cmd.Process.Pid}
	if child {
		line, rerr := bufio.NewReader(stdout).ReadString('\n')
		if err = rerr; err == nil {
			s.child, err = strconv.Atoi(strings.TrimSpace(line))
		}
	}
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, stdout); cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-s.pid, syscall.SIGKILL)
		if s.child != 0 {
			syscall.Kill(s.child, syscall.SIGKILL)
		}
		stdin.Close()
		<-done
	})
	if err != nil {
		t.Fatalf("%q did not print its child's pid: %v", argv, err)
	}
	return s
}

// runs reports whether pid runs (a zombie does not).
func runs(pid int) bool { return procstat.Alive(pid) }

// waitExit waits up to 10 s for pid to exit and reports whether it did.
func waitExit(pid int) bool {
	for range 500 {
		if !runs(pid) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// sandboxFixture makes a supervisor directory under a new runtime base as
// Spawn and a machine would leave it after its supervisor was killed,
// and a work directory (readable by everyone) holding the script
// "supervise" that stand-ins for a supervisor run: it waits on its
// standard input, so the shell keeps exactly the argument vector
// "<binary> supervise DIR".
func sandboxFixture(t *testing.T) (dir, work string) {
	t.Helper()
	base := t.TempDir()
	dir = filepath.Join(base, "0123456789ab", "box")
	for name, content := range map[string]string{
		SpecFile:                   "{}\n",
		LogFile:                    "log\n",
		ConsoleFile:                "console\n",
		"sbx-1234/console.log":     "booted\n",
		"sbx-1234/root.qcow2":      "overlay",
		"sbx-1234/qemu.log":        "",
		"sbx-1234/agent.sock":      "",
		"." + SpecFile + ".tmp-42": "",
	} {
		writeTestFile(t, filepath.Join(dir, name), content)
	}
	work, err := os.MkdirTemp("", "sbx-standin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(work, Verb), "read x\n")
	if err := os.Chmod(filepath.Join(work, Verb), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, work
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// qmpArg is the QMP chardev argument QEMU gets for a machine directory.
func qmpArg(machineDir string) string {
	return "socket,id=qmp,path=" + filepath.Join(machineDir, "qmp.sock") + ",server=on,wait=off"
}

// TestRemoveKillsTheSandboxsProcesses plays a sandbox whose supervisor
// no longer answers and whose QEMU has a helper in its process group.
// Processes with exactly the command lines sbx
// gives them, recorded in state and the status file, are killed, QEMU's
// group with it, and the directory goes.
func TestRemoveKillsTheSandboxsProcesses(t *testing.T) {
	dir, work := sandboxFixture(t)
	sup := startStandIn(t, work, []string{"/usr/local/bin/sbx", Verb, dir}, nil)
	qemu := withChild(t, work, []string{"qemu-system-x86_64", "-c", "sleep 600 & echo $!; read x",
		"-name", "sbx-box", "-chardev", qmpArg(filepath.Join(dir, "sbx-1234"))}, nil)
	if err := writeStatus(dir, Status{Name: "box", State: StateRunning, Pid: sup.pid, QEMUPid: qemu.pid}); err != nil {
		t.Fatal(err)
	}
	lv := Inspect(context.Background(), dir, sup.pid, 0)
	if lv.Running || lv.OrphanQEMU != qemu.pid || !strings.Contains(lv.Gone, "does not answer") {
		t.Errorf("Inspect: %+v; want a supervisor that does not answer and QEMU %d", lv, qemu.pid)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Remove(ctx, dir, sup.pid, 0); err != nil {
		t.Fatal(err)
	}
	for what, pid := range map[string]int{"supervisor": sup.pid, "QEMU": qemu.pid, "QEMU's group": qemu.child} {
		if !waitExit(pid) {
			t.Errorf("the sandbox's %s (pid %d) still runs after Remove", what, pid)
		}
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there after Remove (%v)", dir, err)
	}
}

// TestRemoveSparesOtherProcesses plays a crafted state and status file:
// the process ids they record are of processes whose command lines name
// the sandbox's directory or files in it without being its supervisor
// or QEMU, one of them leading a process group. Remove kills none of
// them.
func TestRemoveSparesOtherProcesses(t *testing.T) {
	dir, work := sandboxFixture(t)
	// A command that follows a file of the sandbox.
	tail := exec.Command("tail", "-f", filepath.Join(dir, "sbx-1234", "console.log"))
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	tailDone := make(chan struct{})
	go func() { tail.Wait(); close(tailDone) }()
	t.Cleanup(func() { tail.Process.Kill(); <-tailDone })
	// Near misses of a supervisor's command line.
	inside := startStandIn(t, work, []string{"sbx", Verb, filepath.Join(dir, "sbx-1234")}, nil)
	extra := startStandIn(t, work, []string{"sh", "-c", "read x", "sbx", Verb, dir}, nil)
	// A group leader whose command line names QEMU's socket, but not as
	// QEMU's monitor.
	leader := withChild(t, work, []string{"sh", "-c", "sleep 600 & echo $!; read x", filepath.Join(dir, "sbx-1234", "qmp.sock")}, nil)

	if err := writeStatus(dir, Status{Name: "box", State: StateRunning, Pid: inside.pid, QEMUPid: leader.pid}); err != nil {
		t.Fatal(err)
	}
	if lv := Inspect(context.Background(), dir, tail.Process.Pid, leader.pid); lv.OrphanQEMU != 0 || strings.Contains(lv.Gone, "does not answer") {
		t.Errorf("Inspect took unrelated processes for the sandbox's: %+v", lv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, pids := range [][2]int{{tail.Process.Pid, leader.pid}, {extra.pid, leader.child}, {leader.pid, inside.pid}} {
		if err := Remove(ctx, dir, pids[0], pids[1]); err != nil {
			t.Fatal(err)
		}
	}
	for what, pid := range map[string]int{
		"tail -f of its console": tail.Process.Pid, "sbx supervise DIR/sbx-1234": inside.pid,
		"sh -c 'read x' sbx supervise DIR": extra.pid, "the group leader naming qmp.sock": leader.pid, "the leader's child": leader.child,
	} {
		if !runs(pid) {
			t.Errorf("Remove killed %s (pid %d), which is not the sandbox's", what, pid)
		}
	}
}

// TestRemoveSparesOtherUsersProcesses plays another local user who runs
// processes with exactly the command lines of the sandbox's supervisor
// and QEMU, and gets their ids into the status file. Remove, run by
// root here, kills neither.
func TestRemoveSparesOtherUsersProcesses(t *testing.T) {
	cred := strangerCred(t)
	dir, work := sandboxFixture(t)
	sup := startStandIn(t, work, []string{"/usr/local/bin/sbx", Verb, dir}, cred)
	qemu := startStandIn(t, work, []string{"qemu-system-x86_64", "-c", "read x",
		"-chardev", qmpArg(filepath.Join(dir, "sbx-1234"))}, cred)
	if err := writeStatus(dir, Status{Name: "box", State: StateRunning, Pid: sup.pid, QEMUPid: qemu.pid}); err != nil {
		t.Fatal(err)
	}
	if lv := Inspect(context.Background(), dir, 0, 0); lv.OrphanQEMU != 0 || strings.Contains(lv.Gone, "does not answer") {
		t.Errorf("Inspect took another user's processes for the sandbox's: %+v", lv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Remove(ctx, dir, sup.pid, qemu.pid); err != nil {
		t.Fatal(err)
	}
	for what, pid := range map[string]int{"supervisor": sup.pid, "QEMU": qemu.pid} {
		if !runs(pid) {
			t.Errorf("Remove killed another user's process with the sandbox's %s command line (pid %d)", what, pid)
		}
	}
}

// strangerCred makes a local user for the test and returns its credentials;
// it is deleted when the test ends. The test is skipped unless it runs
// as root.
func strangerCred(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("making another local user needs root")
	}
	name := "sbxrm" + strconv.Itoa(os.Getpid()%100000)
	if out, err := exec.Command("useradd", "--no-create-home", "--shell", "/bin/sh", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", name).Run() })
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// TestRemoveOnlyWhatSbxMade plays a supervisor directory with entries
// sbx did not make: links planted at the names of its files and machine
// directories, pointing at a victim's files, and a file of another name.
// Remove removes the links, not what they point to, and leaves the
// unknown file, with the directory, saying so.
func TestRemoveOnlyWhatSbxMade(t *testing.T) {
	dir, _ := sandboxFixture(t)
	victim := t.TempDir()
	writeTestFile(t, filepath.Join(victim, "precious"), "keep me\n")
	writeTestFile(t, filepath.Join(victim, "sub", "precious"), "keep me too\n")
	for link, target := range map[string]string{
		StatusFile:              filepath.Join(victim, "precious"),
		"sbx-99":                filepath.Join(victim, "sub"),
		"sbx-1234/console.log2": filepath.Join(victim, "precious"),
		"sbx-5/qemu.log":        filepath.Join(victim, "sub", "precious"),
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, link)), 0o700)
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	writeTestFile(t, filepath.Join(dir, "notes.txt"), "mine\n")

	err := Remove(context.Background(), dir, 0, 0)
	if err == nil || !strings.Contains(err.Error(), "notes.txt") || !strings.Contains(err.Error(), "sbx-1234/console.log2") {
		t.Errorf("Remove = %v; want an error naming notes.txt and sbx-1234/console.log2", err)
	}
	for _, p := range []string{filepath.Join(victim, "precious"), filepath.Join(victim, "sub", "precious"), filepath.Join(dir, "notes.txt")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("Remove took %s: %v", p, err)
		}
	}
	for _, gone := range []string{StatusFile, SpecFile, LogFile, "sbx-99", "sbx-5", "sbx-1234/root.qcow2"} {
		if _, err := os.Lstat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", gone, err)
		}
	}

	// A supervisor directory that is itself a link to the victim.
	linked := filepath.Join(t.TempDir(), "box")
	if err := os.Symlink(victim, linked); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(victim, SpecFile), "{}\n")
	if err := Remove(context.Background(), linked, 0, 0); err == nil {
		t.Errorf("Remove of a link to a directory succeeded")
	}
	if _, err := os.Stat(filepath.Join(victim, SpecFile)); err != nil {
		t.Errorf("Remove removed %s through a link: %v", SpecFile, err)
	}
}
