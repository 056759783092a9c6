package command

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/supervisor"
)

// TestGuestCommandMessages checks what sbx exec (and, where the parsing is
// shared, sbx run and sbx cp) says when the sandbox cannot be reached or
// the arguments are mistaken, against a running sandbox "box" whose guest
// is a real execsrv.Serve.
func TestGuestCommandMessages(t *testing.T) {
	configDir, environ := execGuest(t, supervisor.Spec{Name: "box"})
	writeFile(t, filepath.Join(configDir, "main.hcl"), `
image "img" {
  base = "alpine:3.23"
}

sandbox "box" {
  image = image.img
}

sandbox "idle" {
  image = image.img
}
`)
	// A directory beside the current one, to be named without "--".
	work := t.TempDir()
	t.Chdir(work)
	if err := os.Mkdir("conf", 0o755); err != nil {
		t.Fatal(err)
	}
	notExec := filepath.Join(t.TempDir(), "data")
	writeFile(t, notExec, "not a program\n")

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // in stderr, in order
		not  []string // not in stderr
	}{
		{
			name: "undeclared sandbox",
			args: []string{"exec", configDir, "nosuch", "--", "true"},
			code: ExitError,
			want: []string{`No sandbox "nosuch" in the configuration`, "The configuration in " + configDir + ` has no sandbox "nosuch"`, "the sandboxes are: box, idle"},
			not:  []string{"not running", "apply"},
		},
		{
			name: "declared sandbox not running",
			args: []string{"exec", configDir, "idle", "--", "true"},
			code: ExitError,
			want: []string{"sandbox.idle of " + configDir + " is not running", `"sbx apply" starts it`},
		},
		{
			name: "configuration directory missing",
			args: []string{"exec", filepath.Join(configDir, "gone"), "box", "--", "true"},
			code: ExitError,
			want: []string{"The configuration directory " + filepath.Join(configDir, "gone") + " does not exist"},
			not:  []string{"not running"},
		},
		{
			name: "configuration directory a file",
			args: []string{"exec", notExec, "box", "--", "true"},
			code: ExitError,
			want: []string{notExec + " is not a directory"},
			not:  []string{"not running"},
		},
		{
			name: "forgotten -- after a path",
			args: []string{"exec", "./path/to/config", "box", "ls", "-l", "a b"},
			code: ExitError,
			want: []string{`"./path/to/config" is not a sandbox's name`, "Without --", "sbx exec ./path/to/config box -- ls -l 'a b'"},
			not:  []string{"not running", "sandbox../"},
		},
		{
			name: "a path where the sandbox goes",
			args: []string{"run", configDir, "--", "ls"},
			code: ExitError,
			want: []string{`"` + configDir + `" is not a sandbox's name`, "Usage: sbx run [options] [DIR] SANDBOX -- COMMAND"},
		},
		{
			name: "forgotten -- after a directory with a plain name",
			args: []string{"exec", "conf", "box", "ls"},
			code: ExitError,
			want: []string{"sandbox.conf of . is not running", "conf is a directory", "sbx exec conf box -- ls"},
		},
		{
			name: "cp into an undeclared sandbox",
			args: []string{"cp", configDir, notExec, "nosuch:/tmp/x"},
			code: ExitError,
			want: []string{`No sandbox "nosuch"`, "the sandboxes are: box, idle"},
		},
		{
			name: "command not found",
			args: []string{"exec", configDir, "box", "--", "no-such-command-x", "arg"},
			code: 127,
			want: []string{"Error: Command not found in sandbox.box", "no-such-command-x"},
		},
		{
			name: "command not executable",
			args: []string{"exec", configDir, "box", "--", notExec},
			code: 126,
			want: []string{"Error: Command not executable in sandbox.box", notExec, "permission denied"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Run(tc.args, &Env{Stdout: &stdout, Stderr: &stderr, Environ: environ, Context: context.Background()})
			errOut := stderr.String()
			if code != tc.code {
				t.Errorf("sbx %s: exit %d, want %d; stderr:\n%s", strings.Join(tc.args, " "), code, tc.code, errOut)
			}
			rest := errOut
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Errorf("sbx %s: stderr lacks %q (in order):\n%s", strings.Join(tc.args, " "), w, errOut)
					break
				}
				rest = rest[i+len(w):]
			}
			for _, n := range tc.not {
				if strings.Contains(errOut, n) {
					t.Errorf("sbx %s: stderr says %q:\n%s", strings.Join(tc.args, " "), n, errOut)
				}
			}
		})
	}
}
