package command

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/sbx-dev/sbx/internal/supervisor/router"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/socketpair"

	"github.com/sbx-dev/sbx/internal/guest/execsrv"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// TestExec runs "sbx exec" against a supervisor's router whose guest is a
// real execsrv.Serve on the host, over a socket pair (the stand-in for the
// agent's virtio-serial port), at the directory sbx exec looks in.
func TestExec(t *testing.T) {
	configDir, environ := execGuest(t, supervisor.Spec{Name: "box", Env: []string{"FROM_SPEC=1", "OVER=spec"}})

	run := func(stdin string, args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := Run(args, &Env{Stdin: strings.NewReader(stdin), Stdout: &stdout, Stderr: &stderr, Environ: environ, Context: context.Background()})
		return code, stdout.String(), stderr.String()
	}

	code, out, errOut := run("", "exec", "-e", "OVER=flag", configDir, "box", "--", "sh", "-c", `echo "$FROM_SPEC $OVER"; id -u; echo oops >&2; exit 3`)
	if want := "1 flag\n" + strconv.Itoa(os.Getuid()) + "\n"; code != 3 || out != want || errOut != "oops\n" {
		t.Errorf("exec: code %d, stdout %q, stderr %q; want 3, %q, \"oops\\n\"", code, out, errOut, want)
	}
	code, out, _ = run("typed\n", "exec", "-i", configDir, "sandbox.box", "--", "cat")
	if code != 0 || out != "typed\n" {
		t.Errorf("exec -i: code %d, stdout %q", code, out)
	}
	code, _, _ = run("", "exec", configDir, "box", "--", "sh", "-c", "kill -TERM $$")
	if code != 128+15 {
		t.Errorf("a command killed by SIGTERM: exit %d, want %d", code, 128+15)
	}
	code, _, errOut = run("", "exec", "-timeout", "200ms", configDir, "box", "--", "sleep", "100")
	if code != ExitTimeout || !strings.Contains(errOut, "did not finish within") {
		t.Errorf("exec -timeout: code %d, stderr %q", code, errOut)
	}
	code, _, errOut = run("", "exec", configDir, "other", "--", "true")
	if code != ExitError || !strings.Contains(errOut, "sandbox.other") || !strings.Contains(errOut, "not running") {
		t.Errorf("exec in a sandbox that is not running: code %d, stderr %q", code, errOut)
	}
	code, _, errOut = run("", "exec", configDir, "box", "--")
	if code != ExitError || !strings.Contains(errOut, "No command") {
		t.Errorf("exec without a command: code %d, stderr %q", code, errOut)
	}
}

func TestSuperviseWithoutSpec(t *testing.T) {
	var stderr bytes.Buffer
	code := Run([]string{supervisor.Verb, t.TempDir()}, &Env{Stderr: &stderr, Context: context.Background()})
	if code != ExitError || !strings.Contains(stderr.String(), supervisor.SpecFile) {
		t.Errorf("supervise without a spec: code %d, stderr %q", code, stderr.String())
	}
	var help bytes.Buffer
	code = Run([]string{"help"}, &Env{Stdout: &help, Context: context.Background()})
	if code != ExitOK || !strings.Contains(help.String(), "exec") || strings.Contains(help.String(), supervisor.Verb) {
		t.Errorf("help should list exec and not the hidden supervise verb:\n%s", help.String())
	}
}

// execGuest stands up what "sbx exec" connects to for the sandbox of spec in
// a fresh configuration directory: a supervisor's router whose guest is a
// real execsrv.Serve on the host, over a socket pair, at the directory
// sbx exec looks in. It returns the configuration directory and the
// environment that points sbx there.
func execGuest(t *testing.T, spec supervisor.Spec) (configDir string, environ []string) {
	t.Helper()
	rt, err := os.MkdirTemp("", "sbx-rt") // short: it holds a socket
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	configDir = t.TempDir()
	environ = []string{"SBX_RUNTIME_DIR=" + rt}
	dir, err := supervisor.SandboxDir(supervisor.RuntimeBase(environ), configDir, spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if spec.Image == nil {
		spec.Image = &sandbox.Image{Image: spec.Name}
	}
	b, _ := json.Marshal(spec)
	if err := os.WriteFile(filepath.Join(dir, supervisor.SpecFile), b, 0o600); err != nil {
		t.Fatal(err)
	}

	host, guest := socketpair.New(t)
	served := make(chan error, 1)
	go func() { served <- execsrv.Serve(context.Background(), guest, execsrv.Options{}) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := router.New(ctx, host, router.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, supervisor.SocketFile))
	if err != nil {
		t.Fatal(err)
	}
	go r.Serve(l)
	t.Cleanup(func() {
		r.Close()
		if err := <-served; err != nil {
			t.Errorf("execsrv.Serve: %v", err)
		}
	})
	return configDir, environ
}
