package command

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/supervisor"
	"golang.org/x/term"
)

// TestLogsEscapesOnTerminal: the console holds what the guest wrote,
// escape sequences included. "sbx logs" on a terminal prints them
// escaped; -raw prints them as they are.
func TestLogsEscapesOnTerminal(t *testing.T) {
	if _, err := os.Stat("/dev/ptmx"); err != nil {
		t.Fatalf("this test needs pseudo-terminals: %v", err)
	}
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
	const console = "[    0.1] booting\n\x1b]0;pwned\x07\x1b[2Jgetty\tok\r\n\u202etxt.exe\n"
	if err := os.WriteFile(filepath.Join(sdir, supervisor.ConsoleFile), []byte(console), 0o600); err != nil {
		t.Fatal(err)
	}

	logs := func(args ...string) string {
		master, slave := openPTY(t)
		// No output processing: what sbx writes is what is read.
		if _, err := term.MakeRaw(int(slave.Fd())); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		code := Run(append([]string{"logs", "-console"}, append(args, configDir, "box")...),
			&Env{Stdout: slave, Stderr: &stderr, Environ: environ, Context: context.Background()})
		if code != ExitOK {
			t.Fatalf("logs %v: code %d, stderr %q", args, code, stderr.String())
		}
		slave.Close()
		out, _ := io.ReadAll(master) // ends with EIO once the slave is closed
		return string(out)
	}

	out := logs()
	if strings.ContainsAny(out, "\x1b\x07\u202e") {
		t.Errorf("logs on a terminal printed the guest's control characters: %q", out)
	}
	if want := "[    0.1] booting\n\\x1b]0;pwned\\x07\\x1b[2Jgetty\tok\r\n\\u202etxt.exe\n"; out != want {
		t.Errorf("logs on a terminal printed\n%q\nwant\n%q", out, want)
	}
	if out := logs("-raw"); out != console {
		t.Errorf("logs -raw printed\n%q\nwant the console as it is", out)
	}
}
