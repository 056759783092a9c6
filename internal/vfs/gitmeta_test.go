//go:build linux

package vfs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/policy"
)

// gitDirFiles are what git keeps in a git directory (path.c's
// common_list, setup.c, repository.c, environment.c, sequencer.c), with
// what the guest may do to each: true for writable.
var gitDirFiles = map[string]bool{
	// Read as configuration, redirection or something to run.
	"":                             false, // the directory itself
	"config":                       false,
	"config.lock":                  false,
	"config.worktree":              false,
	"commondir":                    false,
	"gitdir":                       false,
	"locked":                       false,
	"hooks":                        false,
	"hooks/pre-commit":             false,
	"hooks/fsmonitor-watchman":     false,
	"info":                         false,
	"info/exclude":                 false,
	"info/attributes":              false,
	"info/grafts":                  false,
	"info/sparse-checkout":         false,
	"objects/info/alternates":      false,
	"objects/info/http-alternates": false,
	"remotes":                      false,
	"remotes/origin":               false,
	"branches/origin":              false,
	"description":                  false,
	"modules":                      false,
	"modules/new/config":           false,
	"worktrees":                    false,
	"worktrees/new/commondir":      false,
	"some-future-file":             false,
	// What commits, checkouts, merges and fetches write.
	"HEAD":                      true,
	"HEAD.lock":                 true,
	"ORIG_HEAD":                 true,
	"FETCH_HEAD":                true,
	"MERGE_HEAD":                true,
	"CHERRY_PICK_HEAD":          true,
	"REBASE_HEAD":               true,
	"AUTO_MERGE":                true,
	"index":                     true,
	"index.lock":                true,
	"next-index-123.lock":       true,
	"packed-refs":               true,
	"packed-refs.lock":          true,
	"shallow":                   true,
	"shallow.lock":              true,
	"COMMIT_EDITMSG":            true,
	"MERGE_MSG":                 true,
	"SQUASH_MSG":                true,
	"BISECT_LOG":                true,
	"objects":                   true,
	"objects/ab/cdef":           true,
	"objects/pack/pack-1.pack":  true,
	"objects/info/commit-graph": true,
	"objects/info/packs":        true,
	"refs/heads/main":           true,
	"refs/heads/main.lock":      true,
	"refs/tags/v1":              true,
	"logs/HEAD":                 true,
	"logs/refs/heads/main":      true,
	"lost-found/commit/ab":      true,
}

// gitMemFiles are the sequencer's state: in memory.
var gitMemFiles = []string{"rebase-merge", "rebase-merge/git-rebase-todo", "rebase-apply/patch", "sequencer/opts", "sequencer/todo"}

func checkGitDir(t *testing.T, r *Rules, dir string) {
	t.Helper()
	for sub, writable := range gitDirFiles {
		rel := joinRel(dir, sub)
		if sub == "" {
			rel = dir
		}
		want := ReadOnlyPath
		if writable {
			want = Plain
		}
		if got := r.Classify(rel); got != want {
			t.Errorf("%q: %v, want %v", rel, got, want)
		}
		if pl := r.place(rel); pl.writable != writable || pl.inMem || !pl.noLinks {
			t.Errorf("%q: placed %+v, want writable %v on the host, and no links", rel, pl, writable)
		}
	}
	for _, sub := range gitMemFiles {
		rel := joinRel(dir, sub)
		if got := r.Classify(rel); got != TmpfsPath {
			t.Errorf("%q: %v, want tmpfs", rel, got)
		}
		pl := r.place(rel)
		top, _, _ := cutFirst(sub)
		if !pl.inMem || !pl.writable || pl.memRoot != joinRel(dir, top) {
			t.Errorf("%q: placed %+v, want writable in memory at %s", rel, pl, joinRel(dir, top))
		}
	}
}

func cutFirst(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// write makes the files under dir, a trailing slash making a directory.
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if name[len(name)-1] == '/' {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// gitDir is the files of a git directory's skeleton, under prefix.
func gitDir(prefix string) map[string]string {
	return map[string]string{
		prefix + "/HEAD":        "ref: refs/heads/main\n",
		prefix + "/config":      "[core]\n",
		prefix + "/objects/":    "",
		prefix + "/refs/heads/": "",
		prefix + "/hooks/":      "",
	}
}

func rwMount() policy.Mount {
	return policy.Mount{Guest: "/workspace", Host: ".", Access: policy.ReadWrite}
}

func served(t *testing.T, m policy.Mount, work string) *Rules {
	t.Helper()
	s, _ := direct(t, m, work, Limits{})
	return s.fs.rules
}

// TestGitDirectoriesFound checks every kind of git directory the server
// finds at its start, and what it makes of each file of each.
func TestGitDirectoriesFound(t *testing.T) {
	work := t.TempDir()
	files := map[string]string{
		"src/main.go":                 "package main\n",
		"sub/.git":                    "gitdir: ../.git/modules/sub\n",
		"wt/.git":                     "gitdir: " + filepath.Join(work, ".git/worktrees/wt") + "\n",
		"sep/.git":                    "gitdir: ../store/sep.git\n",
		"viaLink/.git":                "gitdir: ../lnk/sep2.git\n",
		"missing/.git":                "gitdir: ../nothere/gd\n",
		"bare.git/HEAD":               "ref: refs/heads/main\n",
		"bare.git/config":             "[core]\n\tbare = true\n",
		"bare.git/objects/":           "",
		"bare.git/refs/":              "",
		"not-git/HEAD":                "a file named HEAD, no objects\n",
		"not-git/config":              "not git's\n",
		".git/worktrees/wt/HEAD":      "ref: refs/heads/wt\n",
		".git/worktrees/wt/commondir": "../..\n",
		".git/worktrees/wt/gitdir":    filepath.Join(work, "wt/.git") + "\n",
	}
	for _, d := range []string{".git", ".git/modules/sub", ".git/modules/name/with/slashes", "store/sep.git", "real/sep2.git"} {
		for k, v := range gitDir(d) {
			files[k] = v
		}
	}
	write(t, work, files)
	if err := os.Symlink("real", filepath.Join(work, "lnk")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src", filepath.Join(work, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../store/sep.git", filepath.Join(work, "src/.git")); err != nil {
		t.Fatal(err)
	}
	r := served(t, rwMount(), work)
	for _, d := range []string{".git", ".git/modules/sub", ".git/modules/name/with/slashes", ".git/worktrees/wt", "store/sep.git", "real/sep2.git", "bare.git"} {
		t.Run(d, func(t *testing.T) { checkGitDir(t, r, d) })
	}
	for rel, want := range map[string]Class{
		// The ".git" files and links, the links to git directories and
		// the missing names they lead to stay as they are.
		"sub/.git": ReadOnlyPath, "wt/.git": ReadOnlyPath, "sep/.git": ReadOnlyPath, "src/.git": ReadOnlyPath,
		"viaLink/.git": ReadOnlyPath, "lnk": ReadOnlyPath, "nothere": ReadOnlyPath, "missing/.git": ReadOnlyPath,
		// The user's work tree: no new repository in it, nested or bare.
		"src/new/.git": ReadOnlyPath, "newdir/HEAD": ReadOnlyPath, "not-git/HEAD": ReadOnlyPath,
		// The rest is the guest's.
		"src/main.go": Plain, "src/new/file": Plain, "not-git/config": Plain, "sub/file": Plain,
		"linked": Plain, "store": Plain, "store/other": Plain, "real": Plain,
		// Not a module's git directory: modules/ itself.
		".git/modules/name/with/config": ReadOnlyPath, ".git/modules/name/other": ReadOnlyPath,
	} {
		if got := r.Classify(rel); got != want {
			t.Errorf("%q: %v, want %v", rel, got, want)
		}
	}
}

// TestGitMountPlaces checks mounts that are not a repository's root: a
// subdirectory of a work tree, a git directory, a directory inside one,
// a tree without any repository, and the opt-out.
func TestGitMountPlaces(t *testing.T) {
	base := t.TempDir()
	files := gitDir("repo/.git")
	files["repo/src/a.go"] = "package a\n"
	files["plain/a.txt"] = "no repository here\n"
	write(t, base, files)

	t.Run("subdirectory of a work tree", func(t *testing.T) {
		r := served(t, rwMount(), filepath.Join(base, "repo/src"))
		for rel, want := range map[string]Class{".git": ReadOnlyPath, "x/.git": ReadOnlyPath, "HEAD": ReadOnlyPath, "a.go": Plain, "x/config": Plain} {
			if got := r.Classify(rel); got != want {
				t.Errorf("%q: %v, want %v", rel, got, want)
			}
		}
	})
	t.Run("git directory", func(t *testing.T) {
		checkGitDir(t, served(t, rwMount(), filepath.Join(base, "repo/.git")), "")
	})
	t.Run("inside a git directory", func(t *testing.T) {
		r := served(t, rwMount(), filepath.Join(base, "repo/.git/hooks"))
		if got := r.Classify("pre-commit"); got != ReadOnlyPath {
			t.Errorf("hooks/pre-commit: %v, want read-only", got)
		}
		r = served(t, rwMount(), filepath.Join(base, "repo/.git/refs"))
		if got := r.Classify("heads/main"); got != Plain {
			t.Errorf("refs/heads/main: %v, want plain", got)
		}
	})
	t.Run("no repository", func(t *testing.T) {
		r := served(t, rwMount(), filepath.Join(base, "plain"))
		for _, rel := range []string{".git", ".git/config", ".git/hooks/pre-commit", "x/.git", "x/HEAD"} {
			if got := r.Classify(rel); got != Plain {
				t.Errorf("%q: %v, want plain (the guest's own repositories)", rel, got)
			}
		}
	})
	t.Run("opt-out", func(t *testing.T) {
		m := rwMount()
		m.GitWritable = true
		r := served(t, m, filepath.Join(base, "repo"))
		for _, rel := range []string{".git", ".git/config", ".git/hooks/pre-commit", ".git/commondir"} {
			if got := r.Classify(rel); got != Plain {
				t.Errorf("%q: %v, want plain", rel, got)
			}
		}
	})
	t.Run("read-only mount", func(t *testing.T) {
		m := rwMount()
		m.Access = policy.ReadOnly
		m.Tmpfs = []string{".git/rebase-merge"}
		s, _ := direct(t, m, filepath.Join(base, "repo"), Limits{})
		if s.fs.rules.git != nil {
			t.Errorf("a read-only mount was scanned: nothing in it reaches the host")
		}
	})
	t.Run("rules win", func(t *testing.T) {
		m := rwMount()
		m.Hide = []string{".git/config"}
		m.Tmpfs = []string{".git/hooks"}
		r := served(t, m, filepath.Join(base, "repo"))
		for rel, want := range map[string]Class{".git/config": Hidden, ".git/hooks/x": TmpfsPath, ".git/info/exclude": ReadOnlyPath} {
			if got := r.Classify(rel); got != want {
				t.Errorf("%q: %v, want %v", rel, got, want)
			}
		}
	})
}

// put creates the file name in dir with content, as a guest's
// open(O_CREAT|O_TRUNC) and write would.
func put(dir p9.File, name, content string) error {
	// Tlcreate turns the fid it is sent on into the new file: send it
	// on a copy.
	d, err := walk(dir)
	if err != nil {
		return err
	}
	f, _, _, err := d.Create(name, p9.WriteOnly|dotlTrunc, 0o644, 0, 0)
	if err != nil {
		d.Close()
		return err
	}
	defer f.Close()
	_, err = f.WriteAt([]byte(content), 0)
	return err
}

// TestGuestCannotRedirectHostGit plays the guest over 9P against a work
// tree with the rules docs/vfs.md used to recommend (the .git/config
// hidden, the hooks read-only) and tries every way it found to make git
// on the host run its command or read its repository: a commondir
// pointing at a repository it made, config and hooks, alternates,
// replacing the .git directory or a submodule's .git file, a nested
// repository for a gitlink, a bare repository, a new module or
// worktree. Every attempt fails and the host tree is unchanged; the
// files a commit writes are still written, and sequencer state stays
// in memory.
func TestGuestCannotRedirectHostGit(t *testing.T) {
	base := t.TempDir()
	work := filepath.Join(base, "work")
	files := gitDir("work/.git")
	for k, v := range gitDir("work/.git/modules/sub") {
		files[k] = v
	}
	files["work/sub/.git"] = "gitdir: ../.git/modules/sub\n"
	files["work/sub/s.txt"] = "submodule file\n"
	files["work/.git/index"] = "DIRC"
	files["work/.git/hooks/pre-commit"] = "#!/bin/sh\nexit 0\n"
	files["work/src/main.go"] = "package main\n"
	write(t, base, files)
	m := rwMount()
	m.Hide = []string{".git/config"}
	m.ReadOnly = []string{".git/hooks"}
	_, root := client(t, m, work, Limits{})
	w := func(names ...string) p9.File {
		t.Helper()
		f, err := walk(root, names...)
		if err != nil {
			t.Fatalf("walk %v: %v", names, err)
		}
		return f
	}
	// The guest's own repository-to-be, made where it may write.
	if _, err := root.Mkdir("evil", 0o755, 0, 0); err != nil {
		t.Fatal(err)
	}
	ev := w("evil")
	if err := put(ev, "config", "[core]\n\tfsmonitor = touch /tmp/pwned\n"); err != nil {
		t.Fatal(err)
	}
	git, sub, src, mod := w(".git"), w("sub"), w("src"), w(".git", "modules", "sub")
	if _, err := w(".git", "objects").Mkdir("info", 0o755, 0, 0); err != nil {
		t.Fatal(err)
	}
	info := w(".git", "objects", "info")
	before := snapshot(t, base)
	for _, c := range []struct {
		what string
		do   func() error
		want unix.Errno
	}{
		{"create .git/commondir", func() error { return put(git, "commondir", "../evil\n") }, unix.EROFS},
		{"symlink .git/commondir", func() error { _, err := git.Symlink("../evil", "commondir", 0, 0); return err }, unix.EROFS},
		{"rename evil/config onto .git/commondir", func() error { return ev.RenameAt("config", git, "commondir") }, unix.EROFS},
		{"link evil/config as .git/config.worktree", func() error { return git.Link(w("evil", "config"), "config.worktree") }, unix.EROFS},
		{"create .git/config (hidden)", func() error { return put(git, "config", "[core]\n") }, unix.EACCES},
		{"create .git/config.lock", func() error { return put(git, "config.lock", "[core]\n") }, unix.EROFS},
		{"create .git/hooks/post-checkout", func() error { return put(w(".git", "hooks"), "post-checkout", "#!/bin/sh\n") }, unix.EROFS},
		{"create .git/info", func() error { _, err := git.Mkdir("info", 0o755, 0, 0); return err }, unix.EROFS},
		{"create .git/objects/info/alternates", func() error { return put(info, "alternates", "/tmp/evil/objects\n") }, unix.EROFS},
		{"create .git/objects/info/http-alternates", func() error { return put(info, "http-alternates", "http://evil\n") }, unix.EROFS},
		{"create .git/remotes", func() error { _, err := git.Mkdir("remotes", 0o755, 0, 0); return err }, unix.EROFS},
		{"create the submodule's config", func() error { return put(mod, "config", "[core]\n") }, unix.EROFS},
		{"create the submodule's commondir", func() error { return put(mod, "commondir", "../../../evil\n") }, unix.EROFS},
		{"mkdir .git/modules/evil", func() error { _, err := w(".git", "modules").Mkdir("evil", 0o755, 0, 0); return err }, unix.EROFS},
		{"mkdir .git/worktrees", func() error { _, err := git.Mkdir("worktrees", 0o755, 0, 0); return err }, unix.EROFS},
		{"rename .git away", func() error { return root.RenameAt(".git", root, "old-git") }, unix.EROFS},
		{"rename evil onto .git", func() error { return root.RenameAt("evil", root, ".git") }, unix.EROFS},
		{"remove sub/.git", func() error { return sub.UnlinkAt(".git", 0) }, unix.EROFS},
		{"write sub/.git", func() error { return put(sub, ".git", "gitdir: ../evil\n") }, unix.EROFS},
		{"rename sub (holds a .git)", func() error { return root.RenameAt("sub", root, "sub2") }, unix.EROFS},
		{"rename .git/modules/sub away", func() error { return w(".git", "modules").RenameAt("sub", root, "m") }, unix.EROFS},
		{"mkdir src/.git (a nested repository)", func() error { _, err := src.Mkdir(".git", 0o755, 0, 0); return err }, unix.EROFS},
		{"create src/.git file", func() error { return put(src, ".git", "gitdir: ../evil\n") }, unix.EROFS},
		{"symlink src/.git", func() error { _, err := src.Symlink("../evil", ".git", 0, 0); return err }, unix.EROFS},
		{"create evil/HEAD (a bare repository)", func() error { return put(ev, "HEAD", "ref: refs/heads/main\n") }, unix.EROFS},
		{"symlink .git/COMMIT_EDITMSG to a host file", func() error {
			_, err := git.Symlink("/home/user/.bashrc", "COMMIT_EDITMSG", 0, 0)
			return err
		}, unix.EPERM},
		{"symlink .git/refs/heads/x", func() error { _, err := w(".git", "refs", "heads").Symlink("../../../evil", "x", 0, 0); return err }, unix.EPERM},
		{"rename a link onto .git/FETCH_HEAD", func() error {
			if _, err := src.Symlink("/home/user/.bashrc", "lnk", 0, 0); err != nil {
				return err
			}
			return src.RenameAt("lnk", git, "FETCH_HEAD")
		}, unix.EPERM},
		{"hard-link a link as .git/ORIG_HEAD", func() error { return git.Link(w("src", "lnk"), "ORIG_HEAD") }, unix.EPERM},
		{"rename a directory into .git/refs", func() error { return root.RenameAt("src", w(".git", "refs"), "src") }, unix.EROFS},
		{"chmod .git", func() error {
			return git.SetAttr(p9.SetAttrMask{Permissions: true}, p9.SetAttr{Permissions: 0o777})
		}, unix.EROFS},
	} {
		wantErrno(t, c.what, c.do(), c.want)
	}
	wantErrno(t, "remove src/lnk", src.UnlinkAt("lnk", 0), 0)
	sameSnapshot(t, "redirecting the host's git", before, snapshot(t, base))

	// What a commit writes is still the guest's.
	heads := w(".git", "refs", "heads")
	for _, c := range []struct {
		dir  p9.File
		name string
	}{{git, "index.lock"}, {git, "COMMIT_EDITMSG"}, {git, "ORIG_HEAD"}, {heads, "main.lock"}, {info, "commit-graph"}, {mod, "index"}} {
		if err := put(c.dir, c.name, "guest data\n"); err != nil {
			t.Errorf("write %s: %v", c.name, err)
		}
	}
	wantErrno(t, "rename index.lock onto index", git.RenameAt("index.lock", git, "index"), 0)
	wantErrno(t, "rename main.lock onto main", heads.RenameAt("main.lock", heads, "main"), 0)
	if b, err := os.ReadFile(filepath.Join(work, ".git/refs/heads/main")); err != nil || string(b) != "guest data\n" {
		t.Errorf("host .git/refs/heads/main: %q, %v", b, err)
	}
	// A rebase's state: in memory, never on the host.
	if _, err := git.Mkdir("rebase-merge", 0o755, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := put(w(".git", "rebase-merge"), "git-rebase-todo", "exec touch /tmp/pwned\n"); err != nil {
		t.Fatal(err)
	}
	if s, err := readAll(t, root, ".git", "rebase-merge", "git-rebase-todo"); err != nil || s != "exec touch /tmp/pwned\n" {
		t.Errorf("the guest reads its todo list back: %q, %v", s, err)
	}
	if _, err := os.Lstat(filepath.Join(work, ".git/rebase-merge")); err == nil {
		t.Errorf("the guest's rebase state reached the host")
	}
}

// BenchmarkGitScan measures the scan a read-write mount's server makes
// when it starts: a work tree of 100 directories of 100 files each, and
// a .git with 256 object directories it need not enter.
func BenchmarkGitScan(b *testing.B) {
	work := b.TempDir()
	for i := 0; i < 100; i++ {
		d := filepath.Join(work, "src", fmt.Sprintf("d%03d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := 0; j < 100; j++ {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d.go", j)), nil, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i := 0; i < 256; i++ {
		if err := os.MkdirAll(filepath.Join(work, ".git/objects", fmt.Sprintf("%02x", i)), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(work, ".git/refs"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := New(rwMount(), Options{HostDir: work})
		if err != nil {
			b.Fatal(err)
		}
		if len(s.fs.rules.git.dirs) != 1 {
			b.Fatalf("git directories %v", s.fs.rules.git.dirs)
		}
		s.Close()
	}
}

// TestGitFileTargets checks .git files whose targets are not git
// directories: the mount's root itself (which would make every path
// read-only) and a plain directory; and absolute targets naming the
// mount's real path when it is served through a link.
func TestGitFileTargets(t *testing.T) {
	base := t.TempDir()
	work := filepath.Join(base, "work")
	files := gitDir("work/gd")
	files["work/a/.git"] = "gitdir: ..\n"
	files["work/b/.git"] = "gitdir: ../plain\n"
	files["work/plain/config"] = "not git's\n"
	files["work/c/.git"] = "gitdir: " + filepath.Join(work, "gd") + "\n"
	files["work/d/.git"] = "gitdir: " + filepath.Join(work, "missing") + "\n"
	write(t, base, files)
	if err := os.Symlink("work", filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	r := served(t, rwMount(), filepath.Join(base, "link"))
	for rel, want := range map[string]Class{
		"src/main.go": Plain, "plain/config": Plain, "a/x": Plain,
		"gd/config": ReadOnlyPath, "gd/HEAD": Plain, "missing": ReadOnlyPath,
	} {
		if got := r.Classify(rel); got != want {
			t.Errorf("%q: %v, want %v", rel, got, want)
		}
	}
}

// TestRenameAwayFromGitIsNotScanned checks that git protection costs a
// directory rename nothing unless a git directory or a pinned path is
// involved: with a scan budget of one entry, renaming a directory of
// several files in the work tree works, while renaming one that holds a
// .git is still looked at and refused.
func TestRenameAwayFromGitIsNotScanned(t *testing.T) {
	work := t.TempDir()
	files := gitDir(".git")
	files["src/a.go"], files["src/b.go"], files["src/c.go"] = "a", "b", "c"
	files["sub/.git"] = "gitdir: ../.git\n"
	files["sub/x"] = "x"
	write(t, work, files)
	_, root := client(t, rwMount(), work, Limits{RenameScan: 1})
	wantErrno(t, "rename src", root.RenameAt("src", root, "moved"), 0)
	wantErrno(t, "rename sub", root.RenameAt("sub", root, "sub2"), unix.EXDEV)
	_, root = client(t, rwMount(), work, Limits{})
	wantErrno(t, "rename sub", root.RenameAt("sub", root, "sub2"), unix.EROFS)
}
