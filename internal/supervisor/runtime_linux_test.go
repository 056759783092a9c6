package supervisor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
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

// The tests here play another local user of a shared host: a user made
// with useradd for the test, running a copy of the test binary as an
// impostor (impostorEnv), who prepares the places sbx is about to use.

// impostorEnv makes the test binary play the other user (impostor)
// instead of running tests; its arguments say what to do.
const impostorEnv = "SBX_SUPERVISOR_TEST_IMPOSTOR"

// impostor is the other user's side: "serve DIR RECORD" makes DIR (and
// what is missing above it) open to all, serves fake supervisor sockets
// there and appends whatever a client sends to RECORD; "plant LINK
// TARGET" makes a symbolic link; "connect SOCKET" connects to a socket,
// sends a line and exits 0 when the server closes the connection at once,
// 3 when it answers or keeps it.
func impostor(args []string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "impostor:", err)
		return 2
	}
	switch {
	case len(args) == 3 && args[0] == "serve":
		dir, record := args[1], args[2]
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return fail(err)
		}
		for p := dir; p != filepath.Dir(filepath.Dir(filepath.Dir(dir))); p = filepath.Dir(p) {
			os.Chmod(p, 0o777)
		}
		for _, name := range []string{SocketFile, ControlFile} {
			path := filepath.Join(dir, name)
			l, err := net.Listen("unix", path)
			if err != nil {
				return fail(err)
			}
			os.Chmod(path, 0o777)
			go func() {
				for {
					conn, err := l.Accept()
					if err != nil {
						return
					}
					go func() {
						b, _ := io.ReadAll(conn)
						if len(b) > 0 {
							f, err := os.OpenFile(record, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
							if err == nil {
								fmt.Fprintf(f, "%s: %q\n", name, b)
								f.Close()
							}
						}
					}()
				}
			}()
		}
		if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o666); err != nil {
			return fail(err)
		}
		select {} // until killed
	case len(args) == 3 && args[0] == "plant":
		if err := os.Symlink(args[2], args[1]); err != nil {
			return fail(err)
		}
		return 0
	case len(args) == 2 && args[0] == "connect":
		conn, err := net.Dial("unix", args[1])
		if err != nil {
			return fail(err)
		}
		conn.Write([]byte("status\n"))
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := conn.Read(make([]byte, 1))
		if n == 0 && err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return 0 // closed at once
		}
		return 3
	}
	return fail(fmt.Errorf("bad arguments %q", args))
}

// otherUser is a second local user, made for the test and removed after
// it, and a copy of the test binary it may run.
type otherUser struct {
	name     string
	uid, gid int
	exe      string
	root     string // a directory every user may enter, for the test's files
}

func newOtherUser(t *testing.T) *otherUser {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a second local user needs root")
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Skip("no useradd to make a second local user")
	}
	var b [4]byte
	rand.Read(b[:])
	name := "sbxt" + hex.EncodeToString(b[:])
	if out, err := exec.Command("useradd", "-m", "-s", "/bin/sh", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", "-r", name).CombinedOutput(); err != nil {
			t.Errorf("userdel -r %s: %v: %s", name, err, out)
		}
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	o := &otherUser{name: name}
	o.uid, _ = strconv.Atoi(u.Uid)
	o.gid, _ = strconv.Atoi(u.Gid)

	o.root, err = os.MkdirTemp("", "sbx-mu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(o.root) })
	if err := os.Chmod(o.root, 0o755); err != nil {
		t.Fatal(err)
	}
	// The test binary's own directory is private to root.
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	o.exe = filepath.Join(o.root, "impostor")
	if err := os.WriteFile(o.exe, self, 0o755); err != nil {
		t.Fatal(err)
	}
	return o
}

// command returns the impostor's command, run as the other user.
func (o *otherUser) command(args ...string) *exec.Cmd {
	cmd := exec.Command(o.exe, args...)
	cmd.Env = []string{impostorEnv + "=1", "PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(o.uid), Gid: uint32(o.gid)}}
	return cmd
}

// run runs the impostor to its end and returns its exit code.
func (o *otherUser) run(t *testing.T, args ...string) int {
	t.Helper()
	out, err := o.command(args...).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ee.ExitCode() == 2 {
			t.Fatalf("impostor %q: %s", args, out)
		}
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("impostor %q: %v: %s", args, err, out)
	}
	return 0
}

// serve starts the impostor's fake supervisor in dir, recording what it
// is sent in the file it returns, and stops it when the test ends.
func (o *otherUser) serve(t *testing.T, dir string) (record string) {
	t.Helper()
	shared := filepath.Join(o.root, "shared")
	if err := os.Mkdir(shared, 0o777); err != nil && !errors.Is(err, os.ErrExist) {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o777|os.ModeSticky)
	record = filepath.Join(shared, "record")
	cmd := o.command("serve", dir, record)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			break
		}
		if i == 500 {
			t.Fatalf("the impostor did not get ready in %s: %s", dir, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return record
}

// sharedTmp returns a temporary directory like /tmp (sticky, open to
// all) in which both users make files.
func (o *otherUser) sharedTmp(t *testing.T) string {
	t.Helper()
	tmp := filepath.Join(o.root, "tmp")
	if err := os.Mkdir(tmp, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return tmp
}

// assertNothingSent checks the impostor's record.
func assertNothingSent(t *testing.T, record string) {
	t.Helper()
	if b, err := os.ReadFile(record); err == nil {
		t.Errorf("the other user's fake supervisor received:\n%s", b)
	}
}

// TestRuntimeBaseMadeByAnotherUser plays the attack on the shared /tmp:
// another user makes sbx-UID first, open to all, with a fake supervisor
// in the victim's sandbox directory. SandboxDir, Spawn, Dial and Stop
// must all refuse it, naming the directory, and send it nothing.
func TestRuntimeBaseMadeByAnotherUser(t *testing.T) {
	o := newOtherUser(t)
	tmp := o.sharedTmp(t)
	environ := []string{"TMPDIR=" + tmp, "API_TOKEN=secret"}
	base := RuntimeBase(environ)
	if want := filepath.Join(tmp, "sbx-"+strconv.Itoa(os.Getuid())); base != want {
		t.Fatalf("RuntimeBase(%q) = %s, want %s", environ, base, want)
	}
	configDir := t.TempDir()
	// The victim's path, as the old SandboxDir named it.
	dir := filepath.Join(base, sandboxHash(t, configDir), "dev")
	record := o.serve(t, dir)
	victim := filepath.Join(t.TempDir(), "bashrc")
	if err := os.WriteFile(victim, []byte("# victim\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o.run(t, "plant", filepath.Join(dir, LogFile), victim)

	var ue *UnsafeError
	if got, err := SandboxDir(base, configDir, "dev"); !errors.As(err, &ue) || !strings.Contains(err.Error(), base) {
		t.Errorf("SandboxDir = %s, %v; want an UnsafeError naming %s", got, err, base)
	} else {
		t.Logf("SandboxDir: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Spawn(ctx, dir, Spec{Name: "dev"}, SpawnOptions{
		Command:      []string{"/bin/sh", "-c", "echo API_TOKEN=secret; exit 1"},
		Env:          environ,
		ReadyTimeout: 5 * time.Second,
	})
	if !errors.As(err, &ue) {
		t.Errorf("Spawn = %v; want an UnsafeError", err)
	}
	if c, err := Dial(ctx, dir); !errors.As(err, &ue) {
		if err == nil {
			c.Close()
		}
		t.Errorf("Dial = %v; want an UnsafeError", err)
	}
	if err := Stop(ctx, dir); !errors.As(err, &ue) {
		t.Errorf("Stop = %v; want an UnsafeError", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "# victim\n" {
		t.Errorf("the file the other user's %s links to was changed:\n%s", LogFile, b)
	}
	for _, name := range []string{SpecFile, StatusFile} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s was written in the other user's directory", name)
		}
	}
	assertNothingSent(t, record)
}

// sandboxHash is the name of the configuration's directory under the
// runtime base (see SandboxDir).
func sandboxHash(t *testing.T, configDir string) string {
	t.Helper()
	dir, err := SandboxDir(t.TempDir(), configDir, "x")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Base(filepath.Dir(dir))
}

// TestDialRefusesASocketOfAnotherUser gives Dial, Stop and Inspect a private
// directory of the victim's holding sockets served by another user (moved
// there; the directory check alone would not see them): they must refuse
// the server before sending it anything.
func TestDialRefusesASocketOfAnotherUser(t *testing.T) {
	o := newOtherUser(t)
	theirs := filepath.Join(o.sharedTmp(t), "theirs")
	record := o.serve(t, theirs)
	dir := filepath.Join(t.TempDir(), "sb")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{SocketFile, ControlFile} {
		if err := os.Rename(filepath.Join(theirs, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var pe *PeerError
	if c, err := Dial(ctx, dir); !errors.As(err, &pe) || pe.UID != o.uid {
		if err == nil {
			c.Close()
		}
		t.Errorf("Dial = %v; want a PeerError for uid %d", err, o.uid)
	} else {
		t.Logf("Dial: %v", err)
	}
	if err := Stop(ctx, dir); !errors.As(err, &pe) {
		t.Errorf("Stop = %v; want a PeerError", err)
	}
	if running(dir) {
		t.Error("running counts the other user's server as a supervisor")
	}
	if lv := Inspect(ctx, dir, 0, 0); lv.Running || lv.Status != nil {
		t.Errorf("Inspect took the other user's server's answer: %+v", lv)
	}
	if _, err := Spawn(ctx, dir, Spec{Name: "dev"}, SpawnOptions{Command: []string{"/bin/false"}, ReadyTimeout: 5 * time.Second}); err == nil {
		t.Error("Spawn with a fake supervisor's sockets in place succeeded")
	}
	time.Sleep(100 * time.Millisecond) // let the impostor record a late write
	assertNothingSent(t, record)
}

// TestSupervisorRefusesClientsOfAnotherUser connects to a supervisor's
// socket as another user (the socket and its directory opened to all, as
// if the modes had been lost): the connection is closed unread, and the
// first connection Accept returns is this user's.
func TestSupervisorRefusesClientsOfAnotherUser(t *testing.T) {
	o := newOtherUser(t)
	dir := filepath.Join(o.root, "sb")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ControlFile)
	l, err := listenPrivate(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		conn, err := l.Accept()
		if err == nil {
			accepted <- conn
		}
		close(accepted)
	}()
	os.Chmod(dir, 0o777)
	os.Chmod(path, 0o777)
	if code := o.run(t, "connect", path); code != 0 {
		t.Errorf("the other user's connection was kept open (impostor exit %d)", code)
	}
	mine, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	select {
	case conn := <-accepted:
		if conn == nil {
			t.Fatal("Accept failed")
		}
		defer conn.Close()
		if uid, err := peerUID(conn.(*net.UnixConn)); err != nil || uid != os.Geteuid() {
			t.Errorf("Accept returned a connection of uid %d (%v), want this user's %d", uid, err, os.Geteuid())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept returned nothing")
	}
}

// TestPlantedSymlinksInOwnDirectory: a private directory of the victim's
// (it was open to others once) where another user planted supervisor.log,
// status.json and spec.json as links to a file of the victim's. Spawn
// must not write through them (the spec replaces its link), and
// ReadStatus must not read through them.
func TestPlantedSymlinksInOwnDirectory(t *testing.T) {
	o := newOtherUser(t)
	dir := filepath.Join(o.root, "sb")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	victim := filepath.Join(t.TempDir(), "bashrc")
	const content = `{"name":"x","state":"running","pid":1}` + "\n"
	if err := os.WriteFile(victim, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	o.run(t, "plant", filepath.Join(dir, LogFile), victim)
	o.run(t, "plant", filepath.Join(dir, StatusFile), victim)
	o.run(t, "plant", filepath.Join(dir, SpecFile), victim)

	var ue *UnsafeError
	if st, err := ReadStatus(dir); !errors.As(err, &ue) {
		t.Errorf("ReadStatus through a planted link = %+v, %v; want an UnsafeError", st, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Spawn(ctx, dir, Spec{Name: "dev"}, SpawnOptions{
		Command:      []string{"/bin/sh", "-c", "echo written-through-the-link; exit 1"},
		ReadyTimeout: 5 * time.Second,
	})
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), LogFile) {
		t.Errorf("Spawn = %v; want an UnsafeError naming %s", err, LogFile)
	}
	if b, _ := os.ReadFile(victim); string(b) != content {
		t.Errorf("the victim file was changed through the planted %s:\n%s", LogFile, b)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("mode of %s after Spawn = %v, %v; want 0700", dir, fi.Mode().Perm(), err)
	}
}
