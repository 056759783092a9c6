package command

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanAgainstRunsNoCommandOfTheRepository plays a guest that, in a
// writable mount of the user's repository, made the configuration's
// directory a git repository of its own (`git init` there is the guest's
// right) whose configuration names commands: a filter driver that its
// info/attributes applies to every file, and a promisor remote whose
// upload-pack is a command, with an object missing so that reading it
// fetches lazily (file transport allowed in its config). The user then
// reviews with `sbx plan -against HEAD DIR`. The git that plan runs must
// execute neither command: plan reads the revision's committed bytes
// (no filters) and lets git use no transport.
func TestPlanAgainstRunsNoCommandOfTheRepository(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(f *fixture, dir, marker string)
	}{
		{"filter driver", func(f *fixture, dir, marker string) {
			writeFile(t, filepath.Join(dir, ".git", "info", "attributes"), "* filter=g\n")
			f.gitRun(dir, "config", "filter.g.smudge", "sh -c 'echo ran > "+marker+"; cat'")
		}},
		{"lazy fetch", func(f *fixture, dir, marker string) {
			out, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD:main.hcl").Output()
			if err != nil {
				t.Fatal(err)
			}
			blob := strings.TrimSpace(string(out))
			if err := os.Remove(filepath.Join(dir, ".git", "objects", blob[:2], blob[2:])); err != nil {
				t.Fatal(err)
			}
			for _, kv := range [][2]string{
				{"core.repositoryformatversion", "1"},
				{"extensions.partialClone", "origin"},
				{"remote.origin.url", dir},
				{"remote.origin.promisor", "true"},
				{"remote.origin.uploadpack", "sh -c 'echo ran > " + marker + "; exit 1'"},
				{"protocol.file.allow", "always"},
			} {
				f.gitRun(dir, "config", kv[0], kv[1])
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			repo := t.TempDir()
			dir := filepath.Join(repo, "box")
			f.writeConfig(dir, specOptions{})
			f.gitRun(repo, "init", "-q")
			f.gitRun(repo, "add", ".")
			f.gitRun(repo, "commit", "-q", "-m", "base")
			// The guest's repository, in the mounted tree.
			f.gitRun(dir, "init", "-q")
			f.gitRun(dir, "add", ".")
			f.gitRun(dir, "commit", "-q", "-m", "the guest's")
			marker := filepath.Join(t.TempDir(), "ran")
			tc.plant(f, dir, marker)

			r := f.run("plan", "-against", "HEAD", dir)
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("sbx plan -against HEAD ran a command the repository's configuration names:\n%s", r)
			}
		})
	}
}
