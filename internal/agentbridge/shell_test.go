package agentbridge

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runShell runs the wrapper with a real sh, its state directory prefix
// moved under dir.
func runShell(t *testing.T, dir, cmd string) (string, int) {
	t.Helper()
	args := ShellArgs(cmd)
	args[2] = strings.Replace(args[2], ShellStateDir, filepath.Join(dir, "st-"), 1)
	c := exec.Command(args[0], args[1:]...)
	c.Dir = dir
	out, err := c.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

func TestShellStatePersists(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	if out, code := runShell(t, dir, `export X="a b'c"; cd sub; exit 3`); code != 3 {
		t.Fatalf("exit code %d (%q), want 3", code, out)
	}
	out, code := runShell(t, dir, `echo "$X"; pwd`)
	if code != 0 || out != "a b'c\n"+filepath.Join(dir, "sub")+"\n" {
		t.Fatalf("second call: %q (%d)", out, code)
	}
	// The command is an argument, never text of the wrapper: a command
	// that plays with the wrapper's quoting is only a command.
	out, _ = runShell(t, dir, `'; echo INJECTED; '`)
	if strings.Contains(out, "INJECTED\n") && !strings.Contains(out, "not found") {
		t.Fatalf("the command ended the wrapper's quoting: %q", out)
	}
	// A state directory that is a symbolic link is not used.
	link := filepath.Join(t.TempDir(), "st-")
	target := t.TempDir()
	uid := strings.TrimSpace(mustOut(t, "id", "-u"))
	if err := os.Symlink(target, link+uid); err != nil {
		t.Fatal(err)
	}
	args := ShellArgs("export Y=1")
	args[2] = strings.Replace(args[2], ShellStateDir, link, 1)
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Fatalf("the state was written through a symbolic link: %v", ents)
	}
}

func mustOut(t *testing.T, name string, args ...string) string {
	b, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
