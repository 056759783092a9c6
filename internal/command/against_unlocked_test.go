package command

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/lockfiles"
)

// TestPlanAgainstRevisionWithoutLock plans against a git revision that
// was committed before the first sbx lock: the plan shows the policy and
// sandbox changes and says that the image inputs of that revision are
// unlocked, instead of failing. The other way round, a working tree with
// no lock file planned with -lockfile=readonly against a locked revision
// says the same of itself and writes no lock file.
func TestPlanAgainstRevisionWithoutLock(t *testing.T) {
	f := newFixture(t)
	repo := t.TempDir()
	dir := filepath.Join(repo, "box")
	f.writeConfig(dir, specOptions{})
	f.gitRun(repo, "init", "-q")
	f.gitRun(repo, "add", ".")
	f.gitRun(repo, "commit", "-q", "-m", "spec without a lock")

	f.writeConfig(dir, specOptions{allow: []string{"api.example.com", "uploads.example.com"}, cpus: 2})
	f.mustRun(ExitOK, "lock", dir)
	f.gitRun(repo, "add", ".")
	f.gitRun(repo, "commit", "-q", "-m", "lock, one more host, two CPUs")

	r := f.mustRun(ExitChanges, "plan", "-against", "HEAD~1", "-lockfile=readonly", "-detailed-exitcode", dir)
	for _, want := range []string{
		"HEAD~1 has no " + lockfiles.FileName + ", so its image inputs are unlocked",
		"adds host uploads.example.com",
		"cpus = 1 -> 2",
		"sandbox.box must be replaced",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan -against a revision without a lock lacks %q:\n%s", want, r)
		}
	}
	if strings.Contains(r.stdout, "image.box") || strings.Contains(r.stdout, "input_hash") {
		t.Errorf("plan shows an image change although the image's spec is the same:\n%s", r)
	}

	// The working tree loses its lock file; HEAD has one.
	lockPath := filepath.Join(dir, lockfiles.FileName)
	if err := os.Remove(lockPath); err != nil {
		t.Fatal(err)
	}
	f.writeConfig(dir, specOptions{allow: []string{"api.example.com"}, cpus: 2})
	r = f.mustRun(ExitChanges, "plan", "-against", "HEAD", "-lockfile=readonly", "-detailed-exitcode", dir)
	if !strings.Contains(r.stdout, "this configuration has no "+lockfiles.FileName) || !strings.Contains(r.stdout, "removes host uploads.example.com") {
		t.Errorf("plan of an unlocked working tree against HEAD:\n%s", r)
	}
	if _, err := os.Stat(lockPath); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("plan -lockfile=readonly wrote the lock file (stat: %v)", err)
	}

	// -json carries the same.
	r = f.mustRun(ExitOK, "plan", "-against", "HEAD~1", "-lockfile=readonly", "-json", dir)
	if !strings.Contains(r.stdout, `"unlocked": [`) {
		t.Errorf("plan -json does not list the unlocked sides:\n%s", r)
	}
}
