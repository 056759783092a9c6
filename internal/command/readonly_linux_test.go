package command

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readOnlyArgsEnv carries the sbx arguments to TestReadOnlyChild, one a
// line.
const readOnlyArgsEnv = "SBX_TEST_READONLY_ARGS"

// TestReadOnlyChild is sbx run by TestPlanInReadOnlyCheckout inside a
// mount namespace where the checkout is mounted read-only; on its own it
// does nothing.
func TestReadOnlyChild(t *testing.T) {
	args, ok := os.LookupEnv(readOnlyArgsEnv)
	if !ok {
		t.Skip("runs only as the child of TestPlanInReadOnlyCheckout")
	}
	os.Exit(Run(strings.Split(args, "\n"), &Env{Stdout: os.Stdout, Stderr: os.Stderr, Environ: os.Environ(), Context: context.Background()}))
}

// readOnlyMount is a shell script that bind-mounts $1 on itself read-only
// in the mount namespace it runs in, then runs the rest of its arguments.
const readOnlyMount = `mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" && shift && exec "$@"`

// runReadOnly runs sbx with args in a private mount namespace in which dir
// is a read-only file system, as a read-only checkout in CI is. As root
// (who ignores permission bits) that takes a read-only bind mount; the
// test is skipped, saying why, where one cannot be made.
func (f *fixture) runReadOnly(dir string, args ...string) result {
	f.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		f.t.Fatal(err)
	}
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", readOnlyMount, "sh", dir,
		exe, "-test.run=^TestReadOnlyChild$")
	cmd.Env = append(append([]string{}, f.environ...), readOnlyArgsEnv+"="+strings.Join(args, "\n"))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		f.t.Fatalf("running sbx %s read-only: %v", strings.Join(args, " "), err)
	}
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// requireReadOnlyMount skips the test unless a read-only bind mount can
// be made here (root, unshare and mount, and a kernel that allows mount
// namespaces).
func requireReadOnlyMount(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("a read-only bind mount needs root")
	}
	for _, tool := range []string{"unshare", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("a read-only bind mount needs %s: %v", tool, err)
		}
	}
	dir := t.TempDir()
	probe := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", readOnlyMount, "sh", dir,
		"sh", "-c", `! touch "$0/probe" 2>/dev/null`, dir)
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("cannot make a read-only bind mount here: %v\n%s", err, out)
	}
}

// snapshot lists every file under dir with its type, size, mode and
// modification time, to show that nothing was written.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		fmt.Fprintf(&b, "%s %v %d %d\n", rel, info.Mode(), info.Size(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestPlanInReadOnlyCheckout plans a locked configuration on a read-only
// file system with -lockfile=readonly: without .sbx it needs no state
// lock and creates nothing; with a committed .sbx it reads the state
// without the lock and says so; -lock=false and -refresh=false work too.
// Nothing in the checkout changes.
func TestPlanInReadOnlyCheckout(t *testing.T) {
	requireReadOnlyMount(t)
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{})
	f.mustRun(ExitOK, "lock", dir)

	before := snapshot(t, dir)
	r := f.runReadOnly(dir, "plan", "-lockfile=readonly", "-detailed-exitcode", dir)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "2 to add") {
		t.Fatalf("plan in a read-only checkout without .sbx:\n%s", r)
	}
	if strings.Contains(r.stdout+r.stderr, "Note:") {
		t.Errorf("plan without .sbx has a note although it needs no lock:\n%s", r)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".sbx")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("plan created .sbx (lstat: %v)", err)
	}
	if after := snapshot(t, dir); after != before {
		t.Errorf("plan changed the checkout:\n%s\nthen\n%s", before, after)
	}

	// A checkout with a state, as if .sbx had been committed.
	applyState(t, dir)
	if err := os.Remove(filepath.Join(dir, ".sbx", "state.lock")); err != nil {
		t.Fatal(err)
	}
	before = snapshot(t, dir)
	r = f.runReadOnly(dir, "plan", "-lockfile=readonly", "-detailed-exitcode", dir)
	if r.code != ExitOK || !strings.Contains(r.stdout, "No changes") {
		t.Fatalf("plan in a read-only checkout with a state:\n%s", r)
	}
	if !strings.Contains(r.stdout, "reading the state without it") || !strings.Contains(r.stdout, "read-only file system") {
		t.Errorf("plan does not say that it read the state without the lock:\n%s", r)
	}
	for _, args := range [][]string{
		{"plan", "-lockfile=readonly", "-lock=false", "-detailed-exitcode", dir},
		{"plan", "-lockfile=readonly", "-lock=false", "-refresh=false", "-json", dir},
	} {
		r = f.runReadOnly(dir, args...)
		if r.code != ExitOK || strings.Contains(r.stdout, "Note:") || strings.Contains(r.stderr, "Note:") {
			t.Errorf("sbx %s: want exit 0 and no note, got:\n%s", strings.Join(args, " "), r)
		}
	}
	if after := snapshot(t, dir); after != before {
		t.Errorf("plan changed the checkout:\n%s\nthen\n%s", before, after)
	}
}
