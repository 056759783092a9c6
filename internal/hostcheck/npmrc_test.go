package hostcheck

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestNPMRunsOutsideTheCheckout plays a checkout with an .npmrc of its
// own, once naming its registry and once a named pipe: doctor asks npm
// for the user's registry from the user's home directory, so the answer
// is the registry of the user's ~/.npmrc, and npm never opens the
// checkout's file (a pipe there would block it until the tool timeout).
func TestNPMRunsOutsideTheCheckout(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal("npm is not on PATH; the npm: checks need it (apt-get install npm)")
	}
	env := baseEnv(t, filepath.Dir(npm)+string(os.PathListSeparator)+os.Getenv("PATH"))
	userrc := filepath.Join(t.TempDir(), "npmrc")
	if err := os.WriteFile(userrc, []byte("registry=https://127.0.0.1:9/users-own/\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env = append(env, "NPM_CONFIG_USERCONFIG="+userrc)
	opts := &Options{Environ: env, Config: config(t, "npm:left-pad@1.3.0")}
	npmrc := filepath.Join(opts.Config.Dir, ".npmrc")

	if err := os.WriteFile(npmrc, []byte("registry=https://127.0.0.1:8/checkouts/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := checkNPM(context.Background(), opts, Apt)
	if r.Status != OK || !strings.Contains(r.Detail, "users-own") || strings.Contains(r.Detail, "checkouts") {
		t.Errorf("with a checkout's .npmrc naming a registry: %+v", r)
	}

	if err := os.Remove(npmrc); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(npmrc, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := checkNPM(context.Background(), opts, Apt); r.Status != OK || !strings.Contains(r.Detail, "users-own") {
		t.Errorf("with a checkout's .npmrc that is a named pipe: %+v", r)
	}
}
