package e2etest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx"
)

// hostGitTry runs git on the host as hostGit does, with the host's hooks
// and fsmonitor live, and returns its output and error instead of
// failing: the point is what it runs, not only whether it succeeds.
func hostGitTry(dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=host", "GIT_AUTHOR_EMAIL=host@test.invalid", "GIT_COMMITTER_NAME=host", "GIT_COMMITTER_EMAIL=host@test.invalid"}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestGitMetadataInVM boots Debian's git with the host's work tree (a
// repository with a submodule, whose .git is a file) mounted read-write
// under the rules docs/vfs.md used to recommend, and plays the guest, as
// the non-root user and as root: it makes a repository of its own with
// a config naming core.fsmonitor and a pre-commit hook, then tries to
// make the host's git use them, through .git/commondir, .git/config and
// config.worktree, the hooks, objects/info/alternates, info/attributes,
// moving .git away, rewriting or removing the submodule's .git file,
// the submodule's own config, commondir and hooks, a nested or bare
// repository made for a gitlink, a new module or worktree, and links in
// .git (COMMIT_EDITMSG, FETCH_HEAD, ORIG_HEAD; made, moved or hard-linked
// there) that git would write through. Then the
// host runs git status, diff, log, commit, checkout and fetch in the
// work tree, with its hooks and fsmonitor live, and the test checks
// that no guest command ran (each would make a marker file outside the
// mount) and that git reads none of the guest's configuration. Before
// the attacks, the guest commits, branches and rebases as usual.
func TestGitMetadataInVM(t *testing.T) {
	requireDebianGit(t)
	cfgDir := vmConfigDir(t, "testdata/vfsgit/sbx.hcl", "kernel.deb")

	// Outside the mount: the markers a guest command run on the host
	// would leave, the submodule's upstream and the work tree's remote.
	markers := filepath.Join(cfgDir, "markers")
	subsrc := filepath.Join(cfgDir, "subsrc")
	upstream := filepath.Join(cfgDir, "upstream.git")
	work := filepath.Join(cfgDir, "work")
	for _, d := range []string{markers, subsrc, work, filepath.Join(work, "scratch")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(subsrc, "s.txt"), []byte("submodule\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostGit(t, subsrc, "init", "-q", "-b", "main")
	hostGit(t, subsrc, "add", "s.txt")
	hostGit(t, subsrc, "commit", "-q", "-m", "submodule")
	hostGit(t, cfgDir, "init", "-q", "--bare", "-b", "main", upstream)
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("hello from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostGit(t, work, "init", "-q", "-b", "main")
	hostGit(t, work, "add", "README.md")
	hostGit(t, work, "commit", "-q", "-m", "from the host")
	hostGit(t, work, "-c", "protocol.file.allow=always", "submodule", "add", "-q", subsrc, "sub")
	hostGit(t, work, "commit", "-q", "-m", "the submodule")
	hostGit(t, work, "remote", "add", "origin", upstream)
	hostGit(t, work, "push", "-q", "origin", "main")
	if b, err := os.ReadFile(filepath.Join(work, "sub/.git")); err != nil || !strings.HasPrefix(string(b), "gitdir: ") {
		t.Fatalf("the submodule's .git is not a file: %q, %v", b, err)
	}
	protected := map[string][]byte{}
	for _, f := range []string{".git/config", ".git/modules/sub/config", "sub/.git"} {
		b, err := os.ReadFile(filepath.Join(work, f))
		if err != nil {
			t.Fatal(err)
		}
		protected[f] = b
	}

	ctx, sb := startVM(t, cfgDir, "dev", 20*time.Minute)

	run := func(user, script string) (string, int) {
		t.Helper()
		out, code, err := guestExec(ctx, sb, 3*time.Minute, sbx.Cmd{Args: []string{"sh", "-c", script}, User: user, Dir: "/workspace",
			Env: []string{"GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@test.invalid", "GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@test.invalid"}})
		if err != nil {
			t.Fatalf("%q: %v", script, err)
		}
		return out, code
	}

	t.Run("guest git", func(t *testing.T) {
		out, code := run("", `set -e
echo 'from the guest' >> README.md
git add README.md
git commit -q -m 'from the guest'
git checkout -q -b feature
echo f > f.txt && git add f.txt && git commit -q -m feature
git checkout -q main
echo m > m.txt && git add m.txt && git commit -q -m 'main again'
git checkout -q feature
git rebase -q main
git log --format=%s
git checkout -q main
git merge -q --no-edit feature
git status --porcelain
# A repository of the guest's own, in memory.
git init -q scratch/own && cd scratch/own && echo o > o && git add o && git commit -q -m own && git log --format=%s
echo guest-done
`)
		if code != 0 || !strings.Contains(out, "feature\nmain again\nfrom the guest\n") || !strings.HasSuffix(out, "own\nguest-done\n") {
			t.Fatalf("git in the guest: exit %d\n%s", code, out)
		}
		if got := hostGit(t, work, "log", "--format=%s", "-4"); got != "feature\nmain again\nfrom the guest\nthe submodule" {
			t.Errorf("host git log after the guest's commits: %q", got)
		}
		if _, err := os.Lstat(filepath.Join(work, ".git/rebase-merge")); err == nil {
			t.Errorf("the guest's rebase left its state on the host")
		}
	})

	const try = `try() { n=$1; shift; if "$@" 2>/tmp/err.$$; then echo "$n ok"; else echo "$n err $(head -c 100 /tmp/err.$$ | tr '\n' ' ')"; fi; }
`
	probes := []string{"commondir", "commondir-ln", "config", "config-worktree", "git-config", "hook", "hooks-mv",
		"alternates", "info-attributes", "gitdir-mv", "subgit-rm", "subgit-write", "sub-mv", "sub-config", "sub-commondir",
		"sub-hook", "nested-init", "nested-gitfile", "nested-link", "bare", "module-new", "worktree-new",
		"link-editmsg", "link-fetchhead", "hardlink-orighead"}
	t.Run("attacks", func(t *testing.T) {
		for _, user := range []string{"", "root"} {
			out, _ := run(user, try+`M=`+markers+`
G="git -c safe.directory=*"
mkdir -p evil/hooks evil/objects evil/refs
printf '[core]\n\tfsmonitor = touch %s/fsmonitor\n\tpager = touch %s/pager\n' $M $M > evil/config
printf '#!/bin/sh\ntouch %s/hook\n' $M > evil/hooks/pre-commit
chmod +x evil/hooks/pre-commit
try commondir sh -c 'echo ../evil > .git/commondir'
try commondir-ln ln -s ../evil .git/commondir
try config sh -c 'cat evil/config > .git/config'
try config-worktree cp evil/config .git/config.worktree
try git-config $G config core.fsmonitor "touch $M/fsmonitor"
try hook cp evil/hooks/pre-commit .git/hooks/pre-commit
try hooks-mv mv .git/hooks .git/hooks-old
try alternates sh -c 'mkdir -p .git/objects/info && echo /workspace/evil/objects > .git/objects/info/alternates'
try info-attributes sh -c 'mkdir -p .git/info && echo "* diff=evil" > .git/info/attributes'
try gitdir-mv mv .git .git-old
try subgit-rm rm -f sub/.git
try subgit-write sh -c 'echo "gitdir: ../evil" > sub/.git'
try sub-mv mv sub sub-old
try sub-config sh -c 'cat evil/config >> .git/modules/sub/config'
try sub-commondir sh -c 'echo ../../../evil > .git/modules/sub/commondir'
try sub-hook cp evil/hooks/pre-commit .git/modules/sub/hooks/pre-commit
try nested-init $G init -q n1
try nested-gitfile sh -c 'mkdir -p n2 && echo "gitdir: ../evil" > n2/.git'
try nested-link sh -c 'mkdir -p n3 && ln -s ../evil n3/.git'
try bare $G init -q --bare evil4
try module-new mkdir .git/modules/evil
try worktree-new $G worktree add -q ../wt2
# Links git on the host would write through, to a host path.
try link-editmsg ln -sf $M/editmsg .git/COMMIT_EDITMSG
ln -sf $M/fetchhead lnk
try link-fetchhead mv -f lnk .git/FETCH_HEAD
try hardlink-orighead ln -f lnk .git/ORIG_HEAD
rm -f lnk
# A gitlink in the index, which the guest may write: git on the host
# enters it if it is a repository.
$G update-index --add --cacheinfo 160000,$($G rev-parse HEAD),evil && echo gitlink-added
`)
			for _, p := range probes {
				if !strings.Contains("\n"+out, "\n"+p+" err ") {
					t.Errorf("as %q: %s was not refused:\n%s", user, p, out)
				}
			}
			t.Logf("as %q:\n%s", user, out)
		}
	})

	t.Run("host git", func(t *testing.T) {
		var outs []string
		for _, args := range [][]string{
			{"status"}, {"diff"}, {"diff", "HEAD"}, {"log", "-p", "-2"},
			{"commit", "-q", "-a", "-m", "from the host, after the guest"},
			{"checkout", "-q", "-b", "host-branch"}, {"fetch", "-q", "origin"}, {"status"},
			{"-C", "sub", "status"}, {"-C", "sub", "log", "-1"},
		} {
			out, err := hostGitTry(work, args...)
			outs = append(outs, "$ git "+strings.Join(args, " ")+"\n"+out)
			if err != nil {
				t.Errorf("host git %v: %v\n%s", args, err, out)
			}
		}
		t.Logf("the host's git:\n%s", strings.Join(outs, "\n"))
		if ents, err := os.ReadDir(markers); err != nil || len(ents) > 0 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("the host's git ran the guest's commands (markers %v, %v)", names, err)
		}
		for dir, want := range map[string]string{work: ".git", filepath.Join(work, "sub"): filepath.Join(work, ".git/modules/sub")} {
			if got, err := hostGitTry(dir, "rev-parse", "--git-common-dir"); err != nil || (got != want && filepath.Join(dir, got) != want) {
				t.Errorf("git's repository for %s: %q, %v; want %s", dir, got, err, want)
			}
			out, err := hostGitTry(dir, "config", "--list", "--show-origin")
			if err != nil || strings.Contains(out, "evil") || strings.Contains(out, "fsmonitor") || strings.Contains(out, "pager") {
				t.Errorf("git reads configuration the guest chose in %s (%v):\n%s", dir, err, out)
			}
		}
		for f, want := range protected {
			if b, err := os.ReadFile(filepath.Join(work, f)); err != nil || !bytes.Equal(b, want) {
				t.Errorf("host %s changed: %q, %v", f, b, err)
			}
		}
		for _, f := range []string{".git/commondir", ".git/config.worktree", ".git/objects/info/alternates", ".git/info/attributes",
			".git/modules/sub/commondir", "n1/.git", "n2/.git", "n3/.git", "evil4/HEAD", ".git/hooks/pre-commit", ".git/modules/sub/hooks/pre-commit"} {
			if _, err := os.Lstat(filepath.Join(work, f)); err == nil {
				t.Errorf("the guest made %s on the host", f)
			}
		}
	})
}
