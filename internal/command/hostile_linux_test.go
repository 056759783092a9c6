package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// These tests put a hostile guest at the socket sbx exec and sbx cp dial:
// it speaks the raw agent protocol (the supervisor's router passes a
// guest's sessions through as they are) and answers as it likes.

// hostileSandbox makes the runtime directory of sandbox "box" of a fresh
// configuration directory and serves its socket with a guest that says
// hello and hands every later frame to respond. It returns the
// configuration directory and the environment pointing sbx there.
func hostileSandbox(t *testing.T, respond func(g *agentproto.Conn, f agentproto.Frame)) (configDir string, environ []string) {
	t.Helper()
	rt, err := os.MkdirTemp("", "sbx-rt") // short: it holds a socket
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	configDir = t.TempDir()
	environ = []string{"SBX_RUNTIME_DIR=" + rt}
	dir, err := supervisor.SandboxDir(supervisor.RuntimeBase(environ), configDir, "box")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(supervisor.Spec{Name: "box", Image: &sandbox.Image{Image: "box"}})
	if err := os.WriteFile(filepath.Join(dir, supervisor.SpecFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, supervisor.SocketFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { conn.Close() })
			go func() {
				g := agentproto.NewConn(conn)
				for {
					f, err := g.ReadFrame()
					if err != nil {
						return
					}
					if f.Type == agentproto.TypeHello {
						g.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Version: agentproto.Version, Software: "hostile",
							Capabilities: []string{agentproto.CapExec, agentproto.CapFile, agentproto.CapSignal}})
						continue
					}
					respond(g, f)
				}
			}()
		}
	}()
	return configDir, environ
}

// runBounded runs sbx with args and fails the test if it has not exited
// within a minute: the point of several tests is that it does exit.
func runBounded(t *testing.T, environ []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runBoundedContext(t, context.Background(), environ, args...)
}

// runBoundedContext is runBounded with ctx as the run's context, which a
// test cancels to play Ctrl-C.
func runBoundedContext(t *testing.T, ctx context.Context, environ []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Run(args, &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Environ: environ, Context: ctx})
	}()
	select {
	case code = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("sbx %s still runs after a minute", strings.Join(args, " "))
	}
	return code, out.String(), errOut.String()
}

// hostileText is what a guest that wants to pass its words for sbx's
// sends in an error: an OSC that retitles the terminal, a carriage
// return, and a line that looks like a plan's.
const hostileText = "denied\x1b]0;pwned\x07\r\n  + sandbox.evil will be created\n\x1b[2J"

// checkQuoted fails unless out is free of escape sequences and of lines
// that start as the guest's fake plan line does.
func checkQuoted(t *testing.T, what, out string) {
	t.Helper()
	if strings.ContainsAny(out, "\x1b\x07\r\u009b") {
		t.Errorf("%s printed a control character the guest sent: %q", what, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  + sandbox.evil") {
			t.Errorf("%s printed the guest's fake plan line as a line of its own: %q", what, out)
		}
	}
	if !strings.Contains(out, "denied") {
		t.Errorf("%s did not print the guest's message: %q", what, out)
	}
}

// TestCpOutHostileGuest: sbx cp out of a guest that announces a
// world-writable set-user-ID file, into a destination where a symbolic
// link to a directory was planted, and from a guest that sends more or
// less than it announced.
func TestCpOutHostileGuest(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)

	var content = []byte("#!/bin/sh\necho hi\n")
	var mode uint32 = 0o4777
	var extra, short bool
	configDir, environ := hostileSandbox(t, func(g *agentproto.Conn, f agentproto.Frame) {
		if f.Type != agentproto.TypeFileGet {
			return
		}
		g.WriteJSON(agentproto.TypeFileInfo, f.Stream, &agentproto.FileInfo{Size: int64(len(content)), Mode: mode})
		switch {
		case extra:
			// Past the announced size, as much as the credit
			// allows, and never an end: a host that only checks
			// at the end fills its disk and waits for ever.
			go func() {
				g.WriteData(f.Stream, agentproto.ChanStdout, content)
				for range agentproto.InitialWindow / agentproto.MaxData {
					if g.WriteData(f.Stream, agentproto.ChanStdout, make([]byte, agentproto.MaxData-len(content))) != nil {
						return
					}
				}
			}()
			return
		case short:
			g.WriteData(f.Stream, agentproto.ChanStdout, content[:5])
		default:
			g.WriteData(f.Stream, agentproto.ChanStdout, content)
		}
		g.WriteJSON(agentproto.TypeResult, f.Stream, &agentproto.Result{})
	})

	host := t.TempDir()
	out := filepath.Join(host, "script")
	code, _, errOut := runBounded(t, environ, "cp", configDir, "box:/bin/script", out)
	if code != ExitOK {
		t.Fatalf("cp: code %d, stderr %q", code, errOut)
	}
	fi, err := os.Lstat(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode(); got != 0o700 {
		t.Errorf("host file mode %v; want -rwx------ (the guest's 0777 less umask 077, no set-user-ID)", got)
	}

	// A symbolic link to a directory planted where the file goes is
	// replaced, not followed.
	victim := t.TempDir()
	link := filepath.Join(host, "link")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	mode = 0o644
	if code, _, errOut := runBounded(t, environ, "cp", configDir, "box:/bin/script", link); code != ExitOK {
		t.Fatalf("cp onto a link: code %d, stderr %q", code, errOut)
	}
	if entries, _ := os.ReadDir(victim); len(entries) != 0 {
		t.Errorf("cp wrote through the planted link into %s: %v", victim, entries)
	}
	if fi, err := os.Lstat(link); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the link was not replaced by the file: %v, %v", fi, err)
	}
	// So is a link to a file.
	precious := filepath.Join(victim, "precious")
	os.WriteFile(precious, []byte("keep"), 0o600)
	link2 := filepath.Join(host, "link2")
	os.Symlink(precious, link2)
	if code, _, errOut := runBounded(t, environ, "cp", configDir, "box:/bin/script", link2); code != ExitOK {
		t.Fatalf("cp onto a link to a file: code %d, stderr %q", code, errOut)
	}
	if b, _ := os.ReadFile(precious); string(b) != "keep" {
		t.Errorf("cp wrote through a link to a file: %q", b)
	}

	// More than announced: an error, and nothing at the destination.
	extra = true
	bad := filepath.Join(host, "bad")
	code, _, errOut = runBounded(t, environ, "cp", configDir, "box:/bin/script", bad)
	if code != ExitError || !strings.Contains(errOut, "more than the") {
		t.Errorf("cp of more than announced: code %d, stderr %q", code, errOut)
	}
	extra, short = false, true
	code, _, errOut = runBounded(t, environ, "cp", configDir, "box:/bin/script", bad)
	if code != ExitError || !strings.Contains(errOut, "the guest announced") {
		t.Errorf("cp of less than announced: code %d, stderr %q", code, errOut)
	}
	if _, err := os.Lstat(bad); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed copy left %s: %v", bad, err)
	}
	entries, _ := os.ReadDir(host)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("a failed copy left %s", e.Name())
		}
	}
}

// TestExecGuestIgnoresCancel: a guest that says the command started and
// then swallows everything, the cancel included. "sbx exec -timeout" and
// an interrupt still end sbx exec, with their exit codes.
func TestExecGuestIgnoresCancel(t *testing.T) {
	configDir, environ := hostileSandbox(t, func(g *agentproto.Conn, f agentproto.Frame) {
		if f.Type == agentproto.TypeExec {
			g.WriteJSON(agentproto.TypeStarted, f.Stream, &agentproto.Started{Pid: 7})
		}
	})
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		code, _, errOut := runBounded(t, environ, "exec", "-timeout", "200ms", configDir, "box", "--", "sleep", "1000")
		if code != ExitTimeout || !strings.Contains(errOut, "did not finish within") {
			t.Errorf("exec -timeout: code %d, stderr %q; want %d", code, errOut, ExitTimeout)
		}
	})
	t.Run("interrupt", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		time.AfterFunc(200*time.Millisecond, cancel)
		code, _, errOut := runBoundedContext(t, ctx, environ, "exec", configDir, "box", "--", "sleep", "1000")
		if code != 128+int(syscall.SIGINT) || !strings.Contains(errOut, "Interrupted") {
			t.Errorf("exec interrupted: code %d, stderr %q; want %d", code, errOut, 128+int(syscall.SIGINT))
		}
	})
}

// TestGuestTextQuoted: what a guest writes in its errors reaches the
// terminal with its control characters escaped and its lines under a
// prefix: no escape sequence, no fake plan line.
func TestGuestTextQuoted(t *testing.T) {
	configDir, environ := hostileSandbox(t, func(g *agentproto.Conn, f agentproto.Frame) {
		e := &agentproto.Error{Code: "EACCES", Message: hostileText}
		switch f.Type {
		case agentproto.TypeExec:
			g.WriteJSON(agentproto.TypeExit, f.Stream, &agentproto.Exit{Code: -1, Error: e})
		case agentproto.TypeFileGet, agentproto.TypeFilePut:
			g.WriteJSON(agentproto.TypeResult, f.Stream, &agentproto.Result{Error: e})
		}
	})
	code, out, errOut := runBounded(t, environ, "exec", configDir, "box", "--", "true")
	if code != ExitError {
		t.Errorf("exec: code %d", code)
	}
	checkQuoted(t, "sbx exec", out+errOut)
	code, out, errOut = runBounded(t, environ, "cp", configDir, "box:/etc/shadow", filepath.Join(t.TempDir(), "x"))
	if code != ExitError {
		t.Errorf("cp out: code %d", code)
	}
	checkQuoted(t, "sbx cp out", out+errOut)
	code, out, errOut = runBounded(t, environ, "cp", configDir, "-", "box:/tmp/x")
	if code != ExitError {
		t.Errorf("cp in: code %d", code)
	}
	checkQuoted(t, "sbx cp in", out+errOut)
}
