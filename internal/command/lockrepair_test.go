package command

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/lockfiles"
)

// extraSpec is the fixture spec with base tag tag and one more artifact,
// a local file.
func (f *fixture) extraSpec(tag string) string {
	return strings.Replace(f.spec(specOptions{baseTag: tag}), `  artifact "data" {`, `  artifact "extra" {
    source = "file:./extra.txt"
    dest   = "/etc/extra.txt"
  }

  artifact "data" {`, 1)
}

// lockBranch writes spec into a new directory that starts from the lock
// file start, runs sbx lock there and returns the lock it wrote.
func (f *fixture) lockBranch(start []byte, spec string) []byte {
	f.t.Helper()
	dir := f.t.TempDir()
	writeFile(f.t, filepath.Join(dir, "main.hcl"), spec)
	writeFile(f.t, filepath.Join(dir, "data.txt"), "data\n")
	writeFile(f.t, filepath.Join(dir, "extra.txt"), "extra\n")
	writeFile(f.t, filepath.Join(dir, lockfiles.FileName), string(start))
	f.mustRun(ExitOK, "lock", dir)
	return readFile(f.t, filepath.Join(dir, lockfiles.FileName))
}

// mergeLocks merges two branches' lock files with git merge-file and
// returns the result, which must hold conflict markers.
func (f *fixture) mergeLocks(base, ours, theirs []byte) []byte {
	f.t.Helper()
	dir := f.t.TempDir()
	writeFile(f.t, filepath.Join(dir, "ours"), string(ours))
	writeFile(f.t, filepath.Join(dir, "base"), string(base))
	writeFile(f.t, filepath.Join(dir, "theirs"), string(theirs))
	cmd := exec.Command("git", "merge-file", "-p", "-L", "HEAD", "-L", "base", "-L", "topic", "ours", "base", "theirs")
	cmd.Dir = dir
	cmd.Env = f.environ
	merged, err := cmd.Output()
	if err == nil || lockfiles.HasConflictMarkers(merged) == 0 {
		f.t.Fatalf("git merge-file left no conflict (%v):\n%s", err, merged)
	}
	return merged
}

// mergedCheckout writes a checkout with spec and the lock file lock and
// returns its directory.
func (f *fixture) mergedCheckout(spec string, lock []byte) string {
	f.t.Helper()
	dir := f.t.TempDir()
	writeFile(f.t, filepath.Join(dir, "main.hcl"), spec)
	writeFile(f.t, filepath.Join(dir, "data.txt"), "data\n")
	writeFile(f.t, filepath.Join(dir, "extra.txt"), "extra\n")
	writeFile(f.t, filepath.Join(dir, lockfiles.FileName), string(lock))
	return dir
}

func mustParseLock(t *testing.T, data []byte) *lockfiles.Image {
	t.Helper()
	l, diags := lockfiles.Parse(data, lockfiles.FileName)
	if diags.HasErrors() {
		t.Fatalf("%v\n%s", diags, data)
	}
	return l.Lookup("box")
}

// TestLockRepairsMergeConflict merges two branches' lock files with git,
// leaving conflict markers. One branch moved the base to tag v2 and the
// npm artifact to 1.1.0; the other moved the base to tag v3 and added an
// artifact, so the base is pinned differently on the two sides. The
// merged spec takes v3 and 1.1.0. plan refuses the lock and says that sbx
// lock repairs it; sbx lock rewrites a valid lock that keeps every pin it
// could read — for the base, the side's pin that matches the merged spec,
// not a new resolution — and plan works again.
func TestLockRepairsMergeConflict(t *testing.T) {
	f := newFixture(t)
	f.pushImage("v3")
	start := t.TempDir()
	f.writeConfig(start, specOptions{})
	f.mustRun(ExitOK, "lock", start)
	baseLock := readFile(t, filepath.Join(start, lockfiles.FileName))

	oursLock := f.lockBranch(baseLock, f.spec(specOptions{baseTag: "v2", toolVersion: "1.1.0"}))
	theirsLock := f.lockBranch(baseLock, f.extraSpec("v3"))
	conflicted := f.mergeLocks(baseLock, oursLock, theirsLock)
	mergedSpec := strings.Replace(f.extraSpec("v3"), `default = "1.0.0"`, `default = "1.1.0"`, 1)
	dir := f.mergedCheckout(mergedSpec, conflicted)
	lockPath := filepath.Join(dir, lockfiles.FileName)
	ours, theirs := mustParseLock(t, oursLock), mustParseLock(t, theirsLock)
	if ours.Inputs["base"].Equal(theirs.Inputs["base"]) {
		t.Fatal("the branches pin the base alike")
	}
	if !bytes.Contains(conflicted, []byte(ours.Inputs["base"].Digest)) || !bytes.Contains(conflicted, []byte(theirs.Inputs["base"].Digest)) {
		t.Fatalf("the merge does not hold both sides' base pins:\n%s", conflicted)
	}

	// The registry moves on after the branches locked: a pin resolved
	// again instead of kept would show it.
	f.pushImage("v3")

	r := f.mustRun(ExitError, "plan", "-lockfile=readonly", dir)
	if !strings.Contains(r.stderr, "run sbx lock to rebuild it") || !strings.Contains(r.stderr, "conflict") {
		t.Errorf("plan on a conflicted lock does not say that sbx lock repairs it:\n%s", r)
	}
	f.mustRun(ExitError, "lock", "-lockfile=readonly", dir)
	if after := readFile(t, lockPath); !bytes.Equal(after, conflicted) {
		t.Fatal("lock -lockfile=readonly changed the conflicted lock")
	}

	r = f.mustRun(ExitOK, "lock", dir)
	if !strings.Contains(r.stdout, "conflict") || !strings.Contains(r.stdout, "image.box base") || !strings.Contains(r.stdout, "Repaired "+lockPath+"; no pin needed resolving again.\n") {
		t.Errorf("lock does not report the repair:\n%s", r)
	}
	got := mustParseLock(t, readFile(t, lockPath))
	for key, want := range map[string]*lockfiles.Pin{
		"artifact.tool":  ours.Inputs["artifact.tool"],
		"base":           theirs.Inputs["base"],
		"artifact.extra": theirs.Inputs["artifact.extra"],
		"artifact.data":  theirs.Inputs["artifact.data"],
	} {
		if want == nil || !got.Inputs[key].Equal(want) {
			t.Errorf("input %s: repaired pin %+v, want the branch's %+v", key, got.Inputs[key], want)
		}
	}
	f.mustRun(ExitOK, "lock", "-lockfile=readonly", dir)
	f.mustRun(ExitOK, "plan", "-lockfile=readonly", dir)

	// A lock file that is a link out of its directory is not read, so not
	// repaired either: it stays an error, and its target is untouched.
	outside := filepath.Join(t.TempDir(), "elsewhere.hcl")
	writeFile(t, outside, string(conflicted))
	if err := os.Remove(lockPath); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, lockPath); err != nil {
		t.Fatal(err)
	}
	r = f.mustRun(ExitError, "lock", dir)
	if !strings.Contains(r.stderr, "symbolic link") {
		t.Errorf("lock through a link out of the directory:\n%s", r)
	}
	if after := readFile(t, outside); !bytes.Equal(after, conflicted) {
		t.Error("lock changed the file a link out of the directory points at")
	}
}

// TestLockRepairResolvesAgainWhenBothSidesMatch merges two branches that
// both locked the base at tag v2, at different times (the tag moved in
// between): both pins match the spec, so sbx lock resolves the base again
// rather than pick one.
func TestLockRepairResolvesAgainWhenBothSidesMatch(t *testing.T) {
	f := newFixture(t)
	start := t.TempDir()
	f.writeConfig(start, specOptions{})
	f.mustRun(ExitOK, "lock", start)
	baseLock := readFile(t, filepath.Join(start, lockfiles.FileName))

	spec := f.spec(specOptions{baseTag: "v2"})
	oursLock := f.lockBranch(baseLock, spec)
	f.pushImage("v2")
	theirsLock := f.lockBranch(baseLock, spec)
	dir := f.mergedCheckout(spec, f.mergeLocks(baseLock, oursLock, theirsLock))
	newest := f.pushImage("v2")

	r := f.mustRun(ExitOK, "lock", dir)
	if !strings.Contains(r.stdout, "resolving it again") || !strings.Contains(r.stdout, "Repaired "+filepath.Join(dir, lockfiles.FileName)+", resolving again:\n  ") || !strings.Contains(r.stdout, "base") {
		t.Errorf("lock does not say it resolves the conflicting pin again:\n%s", r)
	}
	got := mustParseLock(t, readFile(t, filepath.Join(dir, lockfiles.FileName)))
	if got.Inputs["base"].Digest != newest {
		t.Errorf("base pinned to %s, want the tag's current %s", got.Inputs["base"].Digest, newest)
	}
	if want := mustParseLock(t, oursLock).Inputs["artifact.tool"]; !got.Inputs["artifact.tool"].Equal(want) {
		t.Errorf("the pin both sides share changed: %+v, want %+v", got.Inputs["artifact.tool"], want)
	}
}
