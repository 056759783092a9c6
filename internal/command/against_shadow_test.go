package command

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanAgainstRevisionNotShadowedByCheckout plays a pull request that
// widens a sandbox's egress and also adds, at the repository root, a
// directory named like the revision the reviewer plans against ("main")
// holding a copy of the widened configuration. The reviewer runs, from
// the root of the checkout, `sbx plan -against main -fail-on-widen box`.
// The plan must not compare the configuration with the pull request's
// own copy of it (no changes, exit 0): a name that is both a directory
// and a revision is refused as ambiguous, and ./main still names the
// directory.
func TestPlanAgainstRevisionNotShadowedByCheckout(t *testing.T) {
	f := newFixture(t)
	repo := t.TempDir()
	dir := filepath.Join(repo, "box")
	f.writeConfig(dir, specOptions{})
	f.gitRun(repo, "init", "-q", "-b", "main")
	f.gitRun(repo, "add", ".")
	f.gitRun(repo, "commit", "-q", "-m", "base")

	// The pull request.
	f.gitRun(repo, "checkout", "-q", "-b", "pr")
	widened := specOptions{allow: []string{"api.example.com", "uploads.example.com"}}
	f.writeConfig(dir, widened)
	f.writeConfig(filepath.Join(repo, "main"), widened)
	f.gitRun(repo, "add", ".")
	f.gitRun(repo, "commit", "-q", "-m", "one more host, and a directory named main")
	t.Chdir(repo)

	r := f.run("plan", "-against", "main", "-fail-on-widen", "box")
	if r.code == ExitOK {
		t.Fatalf("plan -against main -fail-on-widen passed: the pull request's directory main stood in for the revision:\n%s", r)
	}
	if !strings.Contains(r.stderr, "ambiguous") {
		t.Errorf("plan -against a name that is both a directory and a revision does not say it is ambiguous:\n%s", r)
	}

	// The same revision under a name no directory of the checkout has
	// shows the widening.
	r = f.mustRun(ExitError, "plan", "-against", "refs/heads/main^{commit}", "-fail-on-widen", "box")
	if !strings.Contains(r.stdout, "adds host uploads.example.com") {
		t.Errorf("plan against the revision does not show the new host:\n%s", r)
	}
	// And the directory, written as a path, is still a directory.
	f.mustRun(ExitOK, "plan", "-against", "./main", "-fail-on-widen", "box")
}
