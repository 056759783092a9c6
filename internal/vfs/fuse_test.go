//go:build linux

package vfs

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/policy"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("readdir %s: %v", dir, err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func wantOSErrno(t *testing.T, what string, err error, want unix.Errno) {
	t.Helper()
	if got := errnoOfPath(err); got != want {
		t.Errorf("%s: got %v (%v), want %v", what, got, err, want)
	}
}

// Everyday operations through the host kernel's FUSE client reach the
// host as they would over 9P.
func TestFUSEEverydayOperations(t *testing.T) {
	_, work := tree(t)
	mnt, _ := fuseMount(t, workspace(), work, Limits{})
	p := func(rel string) string { return filepath.Join(mnt, rel) }
	h := func(rel string) string { return filepath.Join(work, rel) }

	if err := writeFile(p("src/new.go"), []byte("package main // new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := readFile(h("src/new.go")); err != nil || string(b) != "package main // new\n" {
		t.Errorf("host has %q, %v", b, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(p("src/new.go"), &st); err != nil || st.Uid != 1000 || st.Gid != 1001 || st.Size != 20 {
		t.Errorf("stat src/new.go: %+v, %v; want owner 1000:1001, size 20", st, err)
	}
	if err := writeFlags(p("src/new.go"), []byte("// more\n"), 0, unix.O_RDWR|unix.O_APPEND, true); err != nil {
		t.Errorf("append and fsync: %v", err)
	}
	if b, _ := readFile(h("src/new.go")); string(b) != "package main // new\n// more\n" {
		t.Errorf("after append the host has %q", b)
	}
	if err := os.Truncate(p("src/new.go"), 4); err != nil {
		t.Errorf("truncate: %v", err)
	}
	if b, _ := readFile(p("src/new.go")); string(b) != "pack" {
		t.Errorf("after truncate: %q", b)
	}
	if err := os.Chmod(p("src/new.go"), 0o755); err != nil {
		t.Errorf("chmod: %v", err)
	}
	if fi, err := os.Stat(p("src/new.go")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("mode after chmod: %v, %v", fi.Mode(), err)
	}
	when := time.Unix(1_000_000, 0)
	if err := os.Chtimes(p("src/new.go"), when, when); err != nil {
		t.Errorf("utimes: %v", err)
	}
	if fi, err := os.Stat(h("src/new.go")); err != nil || !fi.ModTime().Equal(when) {
		t.Errorf("host mtime after utimes: %v, %v", fi.ModTime(), err)
	}
	if err := os.Mkdir(p("src/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p("src/new.go"), p("src/sub/moved.go")); err != nil {
		t.Fatal(err)
	}
	if got := names(t, p("src/sub")); !slices.Equal(got, []string{"moved.go"}) {
		t.Errorf("src/sub lists %v", got)
	}
	if _, err := os.Stat(h("src/sub/moved.go")); err != nil {
		t.Errorf("rename did not reach the host: %v", err)
	}
	// A renamed directory's files are found at their new paths.
	if err := os.Rename(p("src/sub"), p("src/sub2")); err != nil {
		t.Fatal(err)
	}
	if b, err := readFile(p("src/sub2/moved.go")); err != nil || string(b) != "pack" {
		t.Errorf("read after directory rename: %q, %v", b, err)
	}
	if err := os.Symlink("moved.go", p("src/sub2/link")); err != nil {
		t.Fatal(err)
	}
	if l, err := os.Readlink(p("src/sub2/link")); err != nil || l != "moved.go" {
		t.Errorf("readlink: %q, %v", l, err)
	}
	if b, err := readFile(p("src/sub2/link")); err != nil || string(b) != "pack" {
		t.Errorf("read through a link: %q, %v", b, err)
	}
	if err := os.Link(p("src/sub2/moved.go"), p("src/sub2/hard")); err != nil {
		t.Fatal(err)
	}
	var hs unix.Stat_t
	if err := unix.Stat(h("src/sub2/hard"), &hs); err != nil || hs.Nlink != 2 {
		t.Errorf("hard link on the host: nlink %d, %v", hs.Nlink, err)
	}
	for _, n := range []string{"link", "hard", "moved.go"} {
		if err := os.Remove(p("src/sub2/" + n)); err != nil {
			t.Errorf("unlink %s: %v", n, err)
		}
	}
	if err := os.Remove(p("src/sub2")); err != nil {
		t.Errorf("rmdir: %v", err)
	}
	if _, err := os.Lstat(h("src/sub2")); !os.IsNotExist(err) {
		t.Errorf("src/sub2 is still on the host: %v", err)
	}
	// Host edits are seen within the attribute timeout.
	if err := writeFile(h("src/main.go"), []byte("package main // edited on the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	seen := false
	for i := 0; i < 40 && !seen; i++ {
		b, _ := readFile(p("src/main.go"))
		seen = string(b) == "package main // edited on the host\n"
		if !seen {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !seen {
		t.Errorf("a host edit was not seen within 4 s (attribute timeout 1 s)")
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(mnt, &sfs); err != nil || sfs.Namelen != 255 {
		t.Errorf("statfs: %+v, %v", sfs, err)
	}
	// cp and mv as programs do them.
	if out, err := run(t, "", "cp", "-a", p("src"), p("src-copy")); err != nil {
		t.Errorf("cp -a: %v\n%s", err, out)
	}
	if out, err := run(t, "", "mv", p("src-copy"), p("src-moved")); err != nil {
		t.Errorf("mv: %v\n%s", err, out)
	}
	if b, err := readFile(h("src-moved/main.go")); err != nil || !strings.Contains(string(b), "edited") {
		t.Errorf("cp+mv on the host: %q, %v", b, err)
	}
}

// The rules hold through the kernel's client: hidden paths, read-only
// paths and mounts, tmpfs paths, planted links.
func TestFUSERules(t *testing.T) {
	base, work := tree(t)
	mnt, _ := fuseMount(t, workspace(), work, Limits{})
	p := func(rel string) string { return filepath.Join(mnt, rel) }
	before := snapshot(t, base)

	if got := names(t, mnt); slices.Contains(got, ".env") || slices.Contains(got, ".env.local") || slices.Contains(got, "secrets") {
		t.Errorf("root lists %v; hidden names must be absent", got)
	}
	if got := names(t, p(".git")); !slices.Equal(got, []string{"HEAD", "hooks"}) {
		t.Errorf(".git lists %v", got)
	}
	for _, rel := range []string{".env", ".git/config", "src/certs/server.pem", "secrets/db.txt"} {
		_, err := os.Lstat(p(rel))
		wantOSErrno(t, "stat "+rel, err, unix.ENOENT)
		_, err = readFile(p(rel))
		wantOSErrno(t, "read "+rel, err, unix.ENOENT)
	}
	for _, rel := range []string{".env", "src/new.pem", ".env.x"} {
		err := writeFile(p(rel), []byte("x"), 0o644)
		wantOSErrno(t, "create "+rel, err, unix.EACCES)
	}
	wantOSErrno(t, "mkdir secrets", os.Mkdir(p("secrets"), 0o755), unix.EACCES)
	wantOSErrno(t, "rename onto .env", os.Rename(p("src/main.go"), p(".env")), unix.EACCES)
	wantOSErrno(t, "link as .env.y", os.Link(p("src/main.go"), p(".env.y")), unix.EACCES)

	// Read-only paths.
	wantOSErrno(t, "write vendor/lib.go", writeFile(p("vendor/lib.go"), []byte("x"), 0o644), unix.EROFS)
	wantOSErrno(t, "create in vendor", writeFile(p("vendor/new.go"), []byte("x"), 0o644), unix.EROFS)
	wantOSErrno(t, "unlink vendor/lib.go", os.Remove(p("vendor/lib.go")), unix.EROFS)
	wantOSErrno(t, "chmod vendor/lib.go", os.Chmod(p("vendor/lib.go"), 0o777), unix.EROFS)
	wantOSErrno(t, "write .git/hooks/pre-commit", writeFile(p(".git/hooks/pre-commit"), []byte("x"), 0o755), unix.EROFS)

	// Planted links are stored, never followed on the host: the
	// kernel resolves them through the server, rules and all.
	for name, target := range map[string]string{"env": ".env", "gitdir": ".git", "up": ".."} {
		if err := os.Symlink(target, p(name)); err != nil {
			t.Fatalf("symlink %s: %v", name, err)
		}
	}
	_, err := readFile(p("env"))
	wantOSErrno(t, "read through env -> .env", err, unix.ENOENT)
	_, err = readFile(p("gitdir/config"))
	wantOSErrno(t, "read through gitdir/config", err, unix.ENOENT)
	if l, err := os.Readlink(filepath.Join(work, "up")); err != nil || l != ".." {
		t.Errorf("the host holds the link as a link: %q, %v", l, err)
	}
	for _, name := range []string{"env", "gitdir", "up"} {
		os.Remove(p(name))
	}

	// tmpfs paths live in memory.
	if err := os.MkdirAll(p("node_modules/pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(p("node_modules/pkg/index.js"), []byte("module.exports = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := readFile(p("node_modules/pkg/index.js")); err != nil || string(b) != "module.exports = 1\n" {
		t.Errorf("tmpfs read back: %q, %v", b, err)
	}
	if got := names(t, p("node_modules")); !slices.Equal(got, []string{"pkg"}) {
		t.Errorf("node_modules lists %v; the host's own entries must not show", got)
	}
	if err := os.RemoveAll(p("node_modules/pkg")); err != nil {
		t.Errorf("remove tmpfs tree: %v", err)
	}
	sameSnapshot(t, "the rules through FUSE", before, snapshot(t, base))
}

func TestFUSEReadOnlyMount(t *testing.T) {
	base, work := tree(t)
	m := workspace()
	m.Access = policy.ReadOnly
	mnt, _ := fuseMount(t, m, work, Limits{})
	before := snapshot(t, base)
	p := func(rel string) string { return filepath.Join(mnt, rel) }
	wantOSErrno(t, "write src/main.go", writeFile(p("src/main.go"), []byte("x"), 0o644), unix.EROFS)
	wantOSErrno(t, "create src/x", writeFile(p("src/x"), []byte("x"), 0o644), unix.EROFS)
	wantOSErrno(t, "mkdir d", os.Mkdir(p("d"), 0o755), unix.EROFS)
	wantOSErrno(t, "rename", os.Rename(p("src/main.go"), p("src/m.go")), unix.EROFS)
	wantOSErrno(t, "truncate", os.Truncate(p("src/main.go"), 0), unix.EROFS)
	if b, err := readFile(p("src/main.go")); err != nil || string(b) != "package main\n" {
		t.Errorf("read: %q, %v", b, err)
	}
	if err := writeFile(p("node_modules/scratch"), []byte("ok"), 0o644); err != nil {
		t.Errorf("scratch space of a read-only mount: %v", err)
	}
	sameSnapshot(t, "a read-only mount", before, snapshot(t, base))
}

// git works on the mount: a repository made through it (git
// protection off), and one the host had, under git protection, whose
// configuration stays unwritable.
func TestFUSEGit(t *testing.T) {
	t.Run("init", func(t *testing.T) {
		work := t.TempDir()
		mnt, _ := fuseMount(t, policy.Mount{Guest: "/workspace", Host: ".", Access: policy.ReadWrite, GitWritable: true}, work, Limits{})
		gitOn(t, mnt, "init", "-q", "-b", "main")
		if _, err := os.Stat(filepath.Join(work, ".git", "HEAD")); err != nil {
			t.Errorf("git init did not reach the host: %v", err)
		}
		commitSome(t, mnt)
	})
	t.Run("guarded", func(t *testing.T) {
		work := t.TempDir()
		if out, err := run(t, work, "git", "init", "-q", "-b", "main"); err != nil {
			t.Fatalf("git init on the host: %v\n%s", err, out)
		}
		config, _ := readFile(filepath.Join(work, ".git", "config"))
		mnt, _ := fuseMount(t, policy.Mount{Guest: "/workspace", Host: ".", Access: policy.ReadWrite}, work, Limits{})
		commitSome(t, mnt)
		err := writeFile(filepath.Join(mnt, ".git", "config"), []byte("[core]\n\tfsmonitor = evil\n"), 0o644)
		wantOSErrno(t, "write .git/config", err, unix.EROFS)
		wantOSErrno(t, "make a hook", writeFile(filepath.Join(mnt, ".git", "hooks", "post-commit"), []byte("#!/bin/sh\n"), 0o755), unix.EROFS)
		if b, _ := readFile(filepath.Join(work, ".git", "config")); string(b) != string(config) {
			t.Errorf(".git/config changed on the host:\n%s", b)
		}
		if out, err := run(t, work, "git", "log", "--oneline"); err != nil || !strings.Contains(out, "two") {
			t.Errorf("the host's git does not see the guest's commits: %v\n%s", err, out)
		}
	})
}

func gitOn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := run(t, dir, "git", append([]string{"-c", "safe.directory=*"}, args...)...)
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return out
}

func commitSome(t *testing.T, mnt string) {
	t.Helper()
	for i, name := range []string{"a.txt", "dir/b.txt", "dir/deeper/c.txt"} {
		p := filepath.Join(mnt, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeFile(p, []byte(strings.Repeat("line\n", i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitOn(t, mnt, "add", "-A")
	gitOn(t, mnt, "commit", "-q", "-m", "one")
	if out := gitOn(t, mnt, "status", "--porcelain"); out != "" {
		t.Errorf("git status after a commit: %q", out)
	}
	if err := writeFile(filepath.Join(mnt, "a.txt"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := gitOn(t, mnt, "status", "--porcelain"); out != " M a.txt\n" {
		t.Errorf("git status after an edit: %q", out)
	}
	gitOn(t, mnt, "commit", "-q", "-am", "two")
	if out := gitOn(t, mnt, "log", "--format=%s"); out != "two\none\n" {
		t.Errorf("git log: %q", out)
	}
}
