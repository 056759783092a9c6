//go:build linux

package vfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/policy"
)

// The tests below play a hostile guest: first through the 9P protocol
// (the library's own checks included), then calling the file system's
// methods directly with what the library would refuse, so that each of
// the file system's own checks is shown to hold by itself.

func TestHiddenPathsDoNotExist(t *testing.T) {
	_, work := tree(t)
	_, root := client(t, workspace(), work, Limits{})
	for _, names := range [][]string{
		{".env"}, {".env.local"}, {".git", "config"}, {"src", "certs", "server.pem"},
		{"secrets"}, {"secrets", "db.txt"},
	} {
		_, err := walk(root, names...)
		wantErrno(t, "walk "+strings.Join(names, "/"), err, unix.ENOENT)
	}
	if got := list(t, root); slices.Contains(got, ".env") || slices.Contains(got, ".env.local") || slices.Contains(got, "secrets") {
		t.Errorf("root lists %v; hidden names must be absent", got)
	}
	if got := list(t, root, ".git"); !slices.Equal(got, []string{"HEAD", "hooks"}) {
		t.Errorf(".git lists %v; want [HEAD hooks]", got)
	}
	if got := list(t, root, "src", "certs"); len(got) != 0 {
		t.Errorf("src/certs lists %v; want nothing", got)
	}
	if s, err := readAll(t, root, "src", "main.go"); err != nil || s != "package main\n" {
		t.Errorf("read src/main.go = %q, %v", s, err)
	}
}

func TestHiddenNamesCannotBeMade(t *testing.T) {
	base, work := tree(t)
	before := snapshot(t, base)
	_, root := client(t, workspace(), work, Limits{})
	src, err := walk(root, "src")
	if err != nil {
		t.Fatal(err)
	}
	git, err := walk(root, ".git")
	if err != nil {
		t.Fatal(err)
	}
	main, err := walk(root, "src", "main.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		do   func() error
	}{
		{"create .env", func() error { _, _, _, err := root.Create(".env", p9.WriteOnly, 0o644, 0, 0); return err }},
		{"create src/new.pem", func() error { _, _, _, err := src.Create("new.pem", p9.WriteOnly, 0o644, 0, 0); return err }},
		{"mkdir secrets", func() error { _, err := root.Mkdir("secrets", 0o755, 0, 0); return err }},
		{"symlink .git/config", func() error { _, err := git.Symlink("/tmp/evil", "config", 0, 0); return err }},
		{"link main.go as .env.x", func() error { return root.Link(main, ".env.x") }},
		{"rename main.go onto .git/config", func() error { return src.RenameAt("main.go", git, "config") }},
		{"rename main.go onto .env", func() error { return src.RenameAt("main.go", root, ".env") }},
	} {
		wantErrno(t, c.what, c.do(), unix.EACCES)
	}
	// Removing or renaming a hidden name: it does not exist.
	wantErrno(t, "unlink .env", root.UnlinkAt(".env", 0), unix.ENOENT)
	wantErrno(t, "rename .env away", root.RenameAt(".env", src, "leak"), unix.ENOENT)
	for _, f := range []p9.File{src, git, main} {
		f.Close()
	}
	sameSnapshot(t, "making hidden names", before, snapshot(t, base))
}

// Renaming a directory must not move a hidden file into view (".git" to
// "g" would show ".git/config" as "g/config"), nor guest files into a
// hidden or read-only place (a directory renamed to ".git" would put its
// "config" where git reads it on the host).
func TestDirectoryRenameKeepsPlaces(t *testing.T) {
	base, work := tree(t)
	if err := os.MkdirAll(filepath.Join(work, "evil", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "evil", "hooks", "pre-commit"), []byte("#!/bin/sh\ncurl evil\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(work, "cfg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "cfg", "config"), []byte("[core]\n\tfsmonitor = evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, base)
	// The path rules by themselves: git protection, which refuses more
	// of these, is tested in gitmeta_test.go.
	m := workspace()
	m.GitWritable = true
	_, root := client(t, m, work, Limits{})
	wantErrno(t, "rename .git to g (reveals .git/config)", root.RenameAt(".git", root, "g"), unix.EACCES)
	git, err := walk(root, ".git")
	if err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "rename evil into .git as hooks2 (no rule there)", root.RenameAt("evil", git, "hooks2"), 0)
	// "evil" is now ".git/hooks2"; renaming its hooks dir to hooks would
	// plant a hook, and .git/hooks is read-only anyway.
	evil, err := walk(root, ".git", "hooks2")
	if err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "rename .git/hooks2/hooks onto .git/hooks", evil.RenameAt("hooks", git, "hooks"), unix.EROFS)
	wantErrno(t, "rename .git/hooks out of the read-only place", git.RenameAt("hooks", root, "h"), unix.EROFS)
	// A directory holding a "config" moved to where a hidden path is.
	newGit, err := root.Mkdir("newgit", 0o755, 0, 0)
	_ = newGit
	if err != nil {
		t.Fatal(err)
	}
	ng, err := walk(root, "newgit")
	if err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "rename cfg to newgit/x (no rule there)", root.RenameAt("cfg", ng, "x"), 0)
	x, err := walk(root, "newgit", "x")
	if err != nil {
		t.Fatal(err)
	}
	_ = x
	// The tmpfs rule "build/cache": renaming build would move the host's
	// build/cache (shadowed, so not in view) to a place where it is.
	wantErrno(t, "rename build to b (moves a shadowed host path into view)", root.RenameAt("build", root, "b"), unix.EXDEV)
	// Undo so that the host is as before.
	wantErrno(t, "rename back", ng.RenameAt("x", root, "cfg"), 0)
	wantErrno(t, "rename hooks2 back", git.RenameAt("hooks2", root, "evil"), 0)
	wantErrno(t, "rmdir newgit", root.UnlinkAt("newgit", unix.AT_REMOVEDIR), 0)
	sameSnapshot(t, "refused directory renames", before, snapshot(t, base))

	// A rename into a hidden path through its parent: "secrets/" is
	// hidden, so a directory cannot become it.
	wantErrno(t, "rename cfg to secrets", root.RenameAt("cfg", root, "secrets"), unix.EACCES)
}

// A symlink the guest plants — pointing outside the root, at a hidden
// file, or at a directory holding one — is stored and read back, but the
// host never follows it.
func TestPlantedSymlinksAreNotFollowed(t *testing.T) {
	base, work := tree(t)
	_, root := client(t, workspace(), work, Limits{})
	for name, target := range map[string]string{
		"out":    "../outside.txt",
		"abs":    filepath.Join(base, "outside.txt"),
		"env":    ".env",
		"gitdir": ".git",
		"up":     "..",
	} {
		if _, err := root.Symlink(target, name, 0, 0); err != nil {
			t.Fatalf("symlink %s: %v", name, err)
		}
		l, err := walk(root, name)
		if err != nil {
			t.Fatalf("walk %s: %v", name, err)
		}
		if got, err := l.Readlink(); err != nil || got != target {
			t.Errorf("readlink %s = %q, %v; want %q", name, got, err, target)
		}
		// Opening a link is refused by the library; the file system
		// refuses it too (below, TestDirectOpenOfLink).
		if _, _, err := l.Open(p9.ReadOnly); err == nil {
			t.Errorf("opening the link %s succeeded", name)
		}
		l.Close()
	}
	// Walking through a link as if it were a directory.
	_, err := walk(root, "gitdir", "config")
	if err == nil {
		t.Errorf("walk gitdir/config succeeded")
	}
	_, err = walk(root, "up", "outside.txt")
	if err == nil {
		t.Errorf("walk up/outside.txt succeeded")
	}
}

// A directory the guest holds a fid for is replaced on the host by a
// symlink to a directory outside the root (by the host user, or by a
// race): walks and opens from that fid must not follow it.
func TestSymlinkSwappedUnderFid(t *testing.T) {
	base, work := tree(t)
	outside := filepath.Join(base, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "main.go"), []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, root := client(t, workspace(), work, Limits{})
	src, err := walk(root, "src")
	if err != nil {
		t.Fatal(err)
	}
	held, err := walk(root, "src", "main.go")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(work, "src"), filepath.Join(work, "src.moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(work, "src")); err != nil {
		t.Fatal(err)
	}
	// The fid for src/main.go, taken before the swap, names a path
	// whose directory is now a link: using it must not follow the link.
	if _, _, err := held.Open(p9.ReadOnly); err == nil {
		buf := make([]byte, 64)
		n, _ := held.ReadAt(buf, 0)
		t.Errorf("opened src/main.go through a host symlink to %s (read %q)", outside, buf[:n])
	}
	if _, _, _, err := held.GetAttr(p9.AttrMaskAll); err == nil {
		t.Errorf("stat of src/main.go through a host symlink succeeded")
	}
	if err := held.SetAttr(p9.SetAttrMask{Size: true}, p9.SetAttr{Size: 0}); err == nil {
		t.Errorf("truncated src/main.go through a host symlink")
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "main.go")); string(b) != "outside\n" {
		t.Errorf("the file outside the root now holds %q", b)
	}
	if f, err := walk(src, "main.go"); err == nil {
		defer f.Close()
		buf := make([]byte, 64)
		f.Open(p9.ReadOnly)
		n, _ := f.ReadAt(buf, 0)
		t.Errorf("walked src/main.go through a host symlink to %s (read %q)", outside, buf[:n])
	}
	// A link inside the root is no better: a directory replaced by a
	// link to .git would make src2/config name .git/config.
	if err := os.MkdirAll(filepath.Join(work, "src2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "src2", "config"), []byte("plain\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := walk(root, "src2", "config")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(work, "src2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".git", filepath.Join(work, "src2")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cfg.Open(p9.ReadOnly); err == nil {
		buf := make([]byte, 128)
		n, _ := cfg.ReadAt(buf, 0)
		t.Errorf("opened src2/config through a host symlink to .git (read %q)", buf[:n])
	}
	// The same through a directory link deeper down.
	if err := os.Symlink(outside, filepath.Join(work, "src.moved", "deeper")); err != nil {
		t.Fatal(err)
	}
	if _, err := walk(root, "src.moved", "deeper", "main.go"); err == nil {
		t.Errorf("walked src.moved/deeper/main.go through a host symlink")
	}
	// A hidden file reached as another name through a host link.
	if err := os.Symlink(".env", filepath.Join(work, "env-link")); err != nil {
		t.Fatal(err)
	}
	l, err := walk(root, "env-link")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Open(p9.ReadOnly); err == nil {
		t.Errorf("opened env-link, a host symlink to .env")
	}
}

// TestDirectNames calls the file system with names the 9P library
// refuses on its own, so that the file system's checks are tested
// without the library's.
func TestDirectNames(t *testing.T) {
	base, work := tree(t)
	before := snapshot(t, base)
	_, root := direct(t, workspace(), work, Limits{})
	long := strings.Repeat("a", 256)
	// "src/main.go" is inside the root and visible: as one name it is
	// still refused, so that no check relies on a name being a name.
	for _, name := range []string{"..", ".", "", "../outside.txt", "src/../../outside.txt", "/etc/passwd", "a\x00b", long, "src/main.go"} {
		if _, _, err := root.Walk([]string{name}); err == nil {
			t.Errorf("walk %q succeeded", name)
		}
		if _, _, _, err := root.Create(name, p9.WriteOnly, 0o644, 0, 0); err == nil {
			t.Errorf("create %q succeeded", name)
		}
		if _, err := root.Mkdir(name, 0o755, 0, 0); err == nil {
			t.Errorf("mkdir %q succeeded", name)
		}
		if err := root.RenameAt("src", root, name); err == nil {
			t.Errorf("rename src to %q succeeded", name)
		}
		if err := root.UnlinkAt(name, 0); err == nil {
			t.Errorf("unlink %q succeeded", name)
		}
	}
	_, _, err := root.Walk([]string{"..", "outside.txt"})
	wantErrno(t, "walk ../outside.txt", err, unix.EINVAL)
	// Deep paths beyond PATH_MAX.
	f := root
	var names []string
	for i := 0; i < 20; i++ {
		names = append(names, strings.Repeat("d", 250))
	}
	_, _, err = f.Walk(names)
	if err == nil {
		t.Errorf("walking a path of %d bytes succeeded", 20*251)
	}
	sameSnapshot(t, "odd names", before, snapshot(t, base))
}

// A file whose path somehow left the root (it cannot through Walk) is
// still resolved beneath it: RESOLVE_BENEATH is the last line.
func TestDirectEscapedPath(t *testing.T) {
	_, work := tree(t)
	s, _ := direct(t, workspace(), work, Limits{})
	f := &file{fs: s.fs, rel: "../outside.txt"}
	s.fs.files.Add(1)
	if _, _, err := f.Open(p9.ReadOnly); err == nil {
		t.Errorf("opened ../outside.txt")
	}
	if _, _, _, err := f.GetAttr(p9.AttrMaskAll); err == nil {
		t.Errorf("stat ../outside.txt succeeded")
	}
	g := &file{fs: s.fs, rel: "src/../../outside.txt"}
	s.fs.files.Add(1)
	if _, _, _, err := g.GetAttr(p9.AttrMaskAll); err == nil {
		t.Errorf("stat src/../../outside.txt succeeded")
	}
}

func TestDirectOpenOfLink(t *testing.T) {
	_, work := tree(t)
	if err := os.Symlink("../outside.txt", filepath.Join(work, "out")); err != nil {
		t.Fatal(err)
	}
	_, root := direct(t, workspace(), work, Limits{})
	_, l, err := root.Walk([]string{"out"})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = l.Open(p9.ReadOnly)
	wantErrno(t, "open a symlink", err, unix.EPERM)
	wantErrno(t, "truncate a symlink", l.SetAttr(p9.SetAttrMask{Size: true}, p9.SetAttr{Size: 0}), unix.EINVAL)
	wantErrno(t, "chmod a symlink", l.SetAttr(p9.SetAttrMask{Permissions: true}, p9.SetAttr{Permissions: 0o600}), unix.EOPNOTSUPP)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(work), "outside.txt"))
	if err != nil || string(b) != "outside the root\n" {
		t.Errorf("outside.txt is now %q, %v", b, err)
	}
	if st, err := os.Stat(filepath.Join(filepath.Dir(work), "outside.txt")); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("outside.txt mode is now %v, %v", st.Mode(), err)
	}
}

func TestHardLinks(t *testing.T) {
	base, work := tree(t)
	_, root := client(t, workspace(), work, Limits{})
	hook, err := walk(root, ".git", "hooks", "pre-commit")
	if err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "link the read-only hook into a writable place", root.Link(hook, "hook"), unix.EROFS)
	lib, err := walk(root, "vendor", "lib.go")
	if err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "link read-only vendor/lib.go", root.Link(lib, "lib.go"), unix.EROFS)
	main, err := walk(root, "src", "main.go")
	if err != nil {
		t.Fatal(err)
	}
	nm, err := walk(root, "node_modules")
	if err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "link a host file into tmpfs", nm.Link(main, "m"), unix.EXDEV)
	wantErrno(t, "link as a hidden name", root.Link(main, "x.pem"), unix.EACCES)
	src, _ := walk(root, "src")
	wantErrno(t, "link a directory", root.Link(src, "srclink"), unix.EPERM)
	wantErrno(t, "link src/main.go as main2.go", root.Link(main, "main2.go"), 0)
	if b, err := os.ReadFile(filepath.Join(work, "main2.go")); err != nil || string(b) != "package main\n" {
		t.Errorf("main2.go on the host = %q, %v", b, err)
	}
	// A hard link on the host to a file outside the root is the host
	// user's doing; a hidden file cannot even be named as a target.
	if _, err := walk(root, ".env"); err == nil {
		t.Errorf("walked to .env")
	}
	_ = base
}

func TestReadOnly(t *testing.T) {
	for _, c := range []struct {
		name  string
		mount func() policy.Mount
		dir   []string // a directory in the read-only part
		file  string   // a file in dir
	}{
		{"ro mount", func() policy.Mount { m := workspace(); m.Access = policy.ReadOnly; return m }, []string{"src"}, "main.go"},
		{"readonly path", workspace, []string{".git", "hooks"}, "pre-commit"},
		{"readonly dir", workspace, []string{"vendor"}, "lib.go"},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, work := tree(t)
			before := snapshot(t, base)
			_, root := client(t, c.mount(), work, Limits{})
			dir, err := walk(root, c.dir...)
			if err != nil {
				t.Fatal(err)
			}
			file, err := walk(root, append(c.dir, c.file)...)
			if err != nil {
				t.Fatal(err)
			}
			open := func(flags p9.OpenFlags) error {
				f, err := walk(root, append(c.dir, c.file)...)
				if err != nil {
					return err
				}
				defer f.Close()
				_, _, err = f.Open(flags)
				return err
			}
			for _, op := range []struct {
				what string
				do   func() error
			}{
				{"open for writing", func() error { return open(p9.WriteOnly) }},
				{"open read-write", func() error { return open(p9.ReadWrite) }},
				{"open with O_TRUNC", func() error { return open(p9.ReadOnly | dotlTrunc) }},
				{"create", func() error { _, _, _, err := dir.Create("new", p9.WriteOnly, 0o644, 0, 0); return err }},
				{"mkdir", func() error { _, err := dir.Mkdir("newdir", 0o755, 0, 0); return err }},
				{"symlink", func() error { _, err := dir.Symlink("x", "newlink", 0, 0); return err }},
				{"link into", func() error { return dir.Link(file, "again") }},
				{"unlink", func() error { return dir.UnlinkAt(c.file, 0) }},
				{"rename within", func() error { return dir.RenameAt(c.file, dir, "renamed") }},
				{"rename out", func() error { return dir.RenameAt(c.file, root, "stolen") }},
				{"chmod", func() error {
					return file.SetAttr(p9.SetAttrMask{Permissions: true}, p9.SetAttr{Permissions: 0o777})
				}},
				{"truncate", func() error { return file.SetAttr(p9.SetAttrMask{Size: true}, p9.SetAttr{Size: 0}) }},
				{"utimes", func() error {
					return file.SetAttr(p9.SetAttrMask{MTime: true, MTimeNotSystemTime: true}, p9.SetAttr{MTimeSeconds: 1})
				}},
				{"mknod", func() error { _, err := dir.Mknod("fifo", p9.ModeNamedPipe|0o644, 0, 0, 0, 0); return err }},
			} {
				err := op.do()
				if op.what == "mknod" {
					if err == nil {
						t.Errorf("mknod succeeded")
					}
					continue
				}
				wantErrno(t, op.what, err, unix.EROFS)
			}
			// Reading still works.
			if _, err := readAll(t, root, append(c.dir, c.file)...); err != nil {
				t.Errorf("read: %v", err)
			}
			sameSnapshot(t, "writes to a read-only place", before, snapshot(t, base))
		})
	}
}

func TestTmpfsNeverTouchesHost(t *testing.T) {
	base, work := tree(t)
	before := snapshot(t, base)
	_, root := client(t, workspace(), work, Limits{TmpfsBytes: 1 << 20})
	if got := list(t, root, "node_modules"); len(got) != 0 {
		t.Errorf("node_modules starts with %v; want it empty (the host's is not shown)", got)
	}
	if got := list(t, root, "build", "cache"); len(got) != 0 {
		t.Errorf("build/cache starts with %v; want it empty", got)
	}
	nm, err := walk(root, "node_modules")
	if err != nil {
		t.Fatal(err)
	}
	// Many small files and directories, written, renamed and removed.
	for i := 0; i < 200; i++ {
		name := "pkg" + string(rune('a'+i%26)) + strings.Repeat("x", i%7)
		if _, err := walk(nm, name); err != nil {
			if _, err := nm.Mkdir(name, 0o755, 0, 0); err != nil {
				t.Fatalf("mkdir %s: %v", name, err)
			}
		}
		d, err := walk(nm, name)
		if err != nil {
			t.Fatal(err)
		}
		f, _, _, err := d.Create("index.js"+string(rune('0'+i%10)), p9.ReadWrite, 0o644, 0, 0)
		if err != nil {
			if errno(err) == unix.EEXIST {
				d.Close()
				continue
			}
			t.Fatalf("create: %v", err)
		}
		if _, err := f.WriteAt([]byte("module.exports = 1\n"), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		d.Close()
	}
	if got := list(t, root, "node_modules"); len(got) == 0 {
		t.Errorf("node_modules is empty after writing")
	}
	s, err := readAll(t, root, "node_modules", "pkga", "index.js0")
	if err != nil || s != "module.exports = 1\n" {
		t.Errorf("read back %q, %v", s, err)
	}
	// A nested node_modules in a host directory lives in memory too.
	src, _ := walk(root, "src")
	if _, err := src.Mkdir("node_modules", 0o755, 0, 0); err != nil {
		t.Fatalf("mkdir src/node_modules: %v", err)
	}
	if got := list(t, root, "src"); !slices.Contains(got, "node_modules") {
		t.Errorf("src lists %v; want node_modules in it", got)
	}
	// Moving between memory and host is a cross-device rename.
	wantErrno(t, "rename tmpfs to host", nm.RenameAt("pkga", root, "pkga"), unix.EXDEV)
	wantErrno(t, "rename host to tmpfs", src.RenameAt("main.go", nm, "main.go"), unix.EXDEV)
	wantErrno(t, "rename within tmpfs", nm.RenameAt("pkga", nm, "pkga-renamed"), 0)
	// The limit: ENOSPC, not host memory.
	big, _, _, err := nm.Create("big", p9.ReadWrite, 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 32<<10)
	var werr error
	for i := 0; i < 64 && werr == nil; i++ {
		_, werr = big.WriteAt(chunk, int64(i*len(chunk)))
	}
	wantErrno(t, "writing past the tmpfs limit", werr, unix.ENOSPC)
	sameSnapshot(t, "tmpfs writes", before, snapshot(t, base))
}

func TestDeletedUnderOpenFid(t *testing.T) {
	_, work := tree(t)
	_, root := client(t, workspace(), work, Limits{})
	f, err := walk(root, "src", "main.go")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Open(p9.ReadOnly); err != nil {
		t.Fatal(err)
	}
	unopened, err := walk(root, "src", "main.go")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := walk(root, "src")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(work, "src")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := f.ReadAt(buf, 0)
	if string(buf[:n]) != "package main\n" {
		t.Errorf("reading an open, deleted file = %q, %v; want what it held", buf[:n], err)
	}
	if _, _, _, err := f.GetAttr(p9.AttrMaskAll); err != nil {
		t.Errorf("stat of an open, deleted file: %v", err)
	}
	_, _, _, err = unopened.GetAttr(p9.AttrMaskAll)
	wantErrno(t, "stat of a deleted file", err, unix.ENOENT)
	_, _, err = unopened.Open(p9.ReadOnly)
	wantErrno(t, "open of a deleted file", err, unix.ENOENT)
	_, err = walk(dir, "main.go")
	wantErrno(t, "walk in a deleted directory", err, unix.ENOENT)
	_, _, _, err = dir.Create("x", p9.WriteOnly, 0o644, 0, 0)
	wantErrno(t, "create in a deleted directory", err, unix.ENOENT)
	if _, err := os.Stat(filepath.Join(work, "src")); !os.IsNotExist(err) {
		t.Errorf("src came back on the host: %v", err)
	}
}

func TestMissingHostDir(t *testing.T) {
	base := t.TempDir()
	if _, err := New(workspace(), Options{HostDir: filepath.Join(base, "nope")}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("New on a missing directory: %v; want an error naming it", err)
	}
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := New(workspace(), Options{HostDir: file}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("New on a file: %v; want \"not a directory\"", err)
	}
	if _, err := New(workspace(), Options{HostDir: "relative"}); err == nil {
		t.Errorf("New on a relative path succeeded")
	}
}

// A tmpfs file removed while it is open keeps its bytes counted against
// Limits.TmpfsBytes until it is closed: a guest that writes a file,
// unlinks it and keeps it open, over and over, must not hold more host
// memory than the limit.
func TestTmpfsLimitCountsUnlinkedOpenFiles(t *testing.T) {
	_, work := tree(t)
	const limit = 1 << 20
	_, root := client(t, workspace(), work, Limits{TmpfsBytes: limit})
	nm, err := walk(root, "node_modules")
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	held := 0
	var open []p9.File
	for i := 0; i < 8; i++ {
		name := fmt.Sprintf("big%d", i)
		f, err := walk(nm) // Tlcreate makes the directory's fid the file's
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := f.Create(name, p9.ReadWrite, 0o644, 0, 0); err != nil {
			f.Close()
			break
		}
		open = append(open, f)
		for off := 0; off < 12*len(chunk); off += len(chunk) {
			if _, err := f.WriteAt(chunk, int64(off)); err != nil {
				break
			}
			held += len(chunk)
		}
		if err := nm.UnlinkAt(name, 0); err != nil {
			t.Fatalf("unlink %s: %v", name, err)
		}
	}
	if held > limit {
		t.Errorf("open, unlinked tmpfs files hold %d bytes; the limit is %d", held, limit)
	}
	// Closing them gives the room back.
	for _, f := range open {
		f.Close()
	}
	f, _, _, err := nm.Create("again", p9.ReadWrite, 0o644, 0, 0)
	if err != nil {
		t.Fatalf("create after the closes: %v", err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, limit/2), 0); err != nil {
		t.Errorf("writing half the limit after the closes: %v", err)
	}
}
