package command

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// asSbxEnv makes the test binary act as the sbx command when it is
// started as "<binary> supervise DIR" (supervisor.Spawn starts this
// executable): the stand-in for the sbx binary, running the same code.
const asSbxEnv = "SBX_COMMAND_TEST_AS_SBX"

func TestMain(m *testing.M) {
	// Started by supervisor.Spawn as "<this binary> supervise DIR", or by
	// a completion script as "<this binary> __complete ...": be sbx.
	if os.Getenv(asSbxEnv) == "1" && len(os.Args) > 1 && (os.Args[1] == supervisor.Verb || os.Args[1] == completeVerb) {
		os.Exit(Run(os.Args[1:], &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Environ: os.Environ()}))
	}
	code := m.Run()
	machinetest.Cleanup()
	os.Exit(code)
}

// stampWriter records what was written and when the first and the last
// writes came.
type stampWriter struct {
	mu          sync.Mutex
	buf         bytes.Buffer
	first, last time.Time
}

func (w *stampWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if w.first.IsZero() {
		w.first = now
	}
	w.last = now
	return w.buf.Write(p)
}

func (w *stampWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// sbxRun runs "sbx run" on the machinetest sandbox with stdin.
func sbxRun(t *testing.T, stdin string, args ...string) (code int, stdout *stampWriter, stderr string) {
	t.Helper()
	f, _, _ := machinetest.Require(t)
	stdout = &stampWriter{}
	var errBuf bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	code = Run(append([]string{"run"}, args...), &Env{
		Stdin:   strings.NewReader(stdin),
		Stdout:  stdout,
		Stderr:  &errBuf,
		Environ: f.Environ,
		Context: ctx,
	})
	t.Logf("sbx run %s: exit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, stdout, errBuf.String())
	return code, stdout, errBuf.String()
}

func TestRunSandbox(t *testing.T) {
	f, _, _ := machinetest.Require(t)
	dir := f.Dir

	// Not parallel: no other VM runs while it checks that none is left.
	t.Run("interrupt", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stdout := &notifyWriter{want: "started", seen: make(chan struct{})}
		var stderr bytes.Buffer
		go func() {
			<-stdout.seen
			cancel()
		}()
		begin := time.Now()
		code := Run([]string{"run", dir, "box", "--", "sh", "-c", "echo started; sleep 600"}, &Env{
			Stdout: stdout, Stderr: &stderr, Environ: f.Environ, Context: ctx,
		})
		t.Logf("exit %d after %v; stderr:\n%s", code, time.Since(begin), stderr.String())
		if code != 130 || !strings.Contains(stderr.String(), "was killed") {
			t.Errorf("exit %d, want 130 and a message", code)
		}
		if took := time.Since(begin); took > 300*time.Second {
			t.Errorf("sbx run took %v after the interrupt", took)
		}
		if left := qemuChildren(t); len(left) > 0 {
			t.Errorf("QEMU processes left after the interrupt: %v", left)
		}
	})
	t.Run("exit-code-and-streaming", func(t *testing.T) {
		t.Parallel()
		code, stdout, stderr := sbxRun(t, "ignored\n", dir, "box", "--", "sh", "-c", "echo out; echo err >&2; cat; sleep 2; echo done; exit 7")
		if code != 7 {
			t.Errorf("exit %d, want the command's 7", code)
		}
		if got := stdout.String(); got != "out\ndone\n" {
			t.Errorf("stdout %q, want the command's alone (and no stdin without -i)", got)
		}
		if gap := stdout.last.Sub(stdout.first); gap < time.Second {
			t.Errorf("the first and last output came %v apart: the output was not streamed", gap)
		}
		if !strings.Contains(stderr, "err\n") || !strings.Contains(stderr, "found in the cache") {
			t.Errorf("stderr lacks the command's error or the build's line:\n%s", stderr)
		}
		if !strings.Contains(stderr, "Warning: Using TCG") || !strings.Contains(stderr, "TCG") {
			t.Errorf("stderr does not note that TCG is used:\n%s", stderr)
		}
	})
	t.Run("user-env-dir-stdin", func(t *testing.T) {
		t.Parallel()
		code, stdout, _ := sbxRun(t, "piped in\n", "-i", "-e", "GREETING=hello there", "-w", "/tmp", dir, "box", "--",
			"sh", "-c", `id -un; echo "$GREETING"; pwd; cat; id -u root`)
		want := machinetest.User + "\nhello there\n/tmp\npiped in\n0\n"
		if code != 0 || stdout.String() != want {
			t.Errorf("exit %d, stdout %q; want 0 and %q", code, stdout.String(), want)
		}
	})
	t.Run("signal", func(t *testing.T) {
		t.Parallel()
		// On a terminal (-t), whose output comes with \r\n.
		code, stdout, _ := sbxRun(t, "", "-t", "-u", "root", dir, "box", "--", "sh", "-c", "test -t 0 && test -t 1 && echo on a tty; kill -TERM $$")
		if code != 128+15 {
			t.Errorf("exit %d, want 143 for SIGTERM", code)
		}
		if got := stdout.String(); got != "on a tty\r\n" {
			t.Errorf("stdout %q, want the command on a terminal", got)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		begin := time.Now()
		code, _, stderr := sbxRun(t, "", "-timeout", "2s", dir, "box", "--", "sleep", "600")
		if code != ExitTimeout || !strings.Contains(stderr, "did not finish within 2s") {
			t.Errorf("exit %d, want %d and a message", code, ExitTimeout)
		}
		if took := time.Since(begin); took > 300*time.Second {
			t.Errorf("sbx run took %v: the timeout did not kill the command", took)
		}
	})
}

func TestRunUsage(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/main.hcl", "sandbox \"a\" {\n  image = image.i\n}\nimage \"i\" {}\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "Name the sandbox and the command"},
		{[]string{"box"}, "No command to run in box"},
		{[]string{"a", "b", "c", "--", "true"}, "takes [DIR] SANDBOX before --; got a b c"},
		{[]string{"-e", "NOEQUALS", "box", "true"}, `-e "NOEQUALS": write KEY=VALUE`},
		{[]string{"-bogus", "box", "true"}, "flag provided but not defined: -bogus"},
		{[]string{dir, "nope", "--", "true"}, `No sandbox "nope" in the configuration`},
	} {
		var stderr bytes.Buffer
		code := Run(append([]string{"run"}, c.args...), &Env{Stderr: &stderr, Context: context.Background()})
		if code != ExitError || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("sbx run %q: exit %d, stderr %q; want 1 and %q", c.args, code, stderr.String(), c.want)
		}
	}
	var stdout bytes.Buffer
	if code := Run([]string{"run", "-h"}, &Env{Stdout: &stdout}); code != ExitOK || !strings.Contains(stdout.String(), "Usage: sbx run") {
		t.Errorf("sbx run -h: %d %q", code, stdout.String())
	}
}

// notifyWriter closes seen once want has been written.
type notifyWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}

// qemuChildren lists the QEMU processes this test process started that
// are still there.
func qemuChildren(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc to look for processes in")
	}
	var left []string
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		status := string(b)
		if strings.Contains(status, "\nPPid:\t"+strconv.Itoa(os.Getpid())+"\n") && strings.HasPrefix(status, "Name:\tqemu-system") {
			left = append(left, e.Name())
		}
	}
	return left
}
