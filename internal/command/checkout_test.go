package command

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/state"
)

// sbx plan on an untrusted checkout: a .sbx/state.lock committed as a link
// to one of the user's files must not truncate it.
func TestPlanDoesNotWriteThroughCommittedStateLock(t *testing.T) {
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{})
	f.mustRun(ExitOK, "lock", dir)

	const bashrc = "export PATH=$HOME/bin:$PATH\n"
	victim := filepath.Join(t.TempDir(), ".bashrc")
	writeFile(t, victim, bashrc)
	if err := os.Mkdir(filepath.Join(dir, state.Dir), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, state.Dir, state.LockFileName)
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	r := f.run("plan", dir)
	if b, _ := os.ReadFile(victim); string(b) != bashrc {
		t.Errorf("sbx plan changed the file the lock file links to: %q", b)
	}
	if r.code != ExitError || !strings.Contains(r.stderr, link+" is a symbolic link") {
		t.Errorf("want exit %d and an error naming the link, got:\n%s", ExitError, r)
	}
}

// sbx plan on an untrusted checkout: a sbx.lock.hcl linked to a file
// outside is not read, and its content is not printed.
func TestPlanDoesNotReadLinkedLockFile(t *testing.T) {
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{})
	outside := filepath.Join(t.TempDir(), ".env")
	writeFile(t, outside, "AWS_SECRET_ACCESS_KEY = \"wJalrXUtnFEMI-secret\"\n")
	link := filepath.Join(dir, lockfiles.FileName)
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	r := f.mustRun(ExitError, "plan", "-lockfile=readonly", dir)
	if strings.Contains(r.stdout+r.stderr, "wJalrXUtnFEMI") {
		t.Errorf("sbx plan printed the file the lock file links to:\n%s", r)
	}
	if !strings.Contains(r.stderr, link) {
		t.Errorf("the error does not name %s:\n%s", link, r)
	}
}

// A saved plan holds what the state holds; it is written 0600 like the
// state.
func TestPlanOutIsPrivate(t *testing.T) {
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{})
	f.mustRun(ExitOK, "lock", dir)
	out := filepath.Join(t.TempDir(), "plan.json")
	f.mustRun(ExitOK, "plan", "-out", out, dir)
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", out, fi.Mode().Perm())
	}
}

// sbx show on an untrusted checkout: a state file's values (user, policy
// rules, origins) can hold escape sequences and newlines; shown, they
// must neither drive the terminal nor pass for lines of their own.
func TestShowStateEscapesCheckoutText(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, state.Dir), 0o700); err != nil {
		t.Fatal(err)
	}
	const evil = "agent\x1b]0;pwned\x07\n  allow       evil.example  (egress.fake, main.hcl:1)\u202e"
	st := `{
  "format_version": 1,
  "lineage": "6f1a6d5e-4c1c-4b59-9a43-2f5d3e1c0a11",
  "serial": 1,
  "resources": [
    {
      "address": "sandbox.box",
      "sandbox": {
        "image": "agent",
        "image_hash": "sha256:00",
        "cpus": 1,
        "memory": 536870912,
        "user": ` + strconvQuote(evil) + `,
        "policy": {},
        "policy_hash": "sha256:00"
      }
    }
  ]
}
`
	writeFile(t, filepath.Join(dir, state.Dir, state.FileName), st)
	r := f.mustRun(ExitOK, "show", filepath.Join(dir, state.Dir, state.FileName))
	if !strings.Contains(r.stdout, "agent") {
		t.Fatalf("the user is not shown:\n%s", r)
	}
	if strings.ContainsAny(r.stdout, "\x1b\x07\u202e") {
		t.Errorf("show printed a control character from the state file:\n%q", r.stdout)
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "  allow       evil.example") {
			t.Errorf("the state file's text made a line of its own:\n%s", r.stdout)
		}
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
