//go:build linux

package vfs

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/policy"
)

// The tests below play a guest that chmods, creates and makes
// directories with modes that would open the host's tree to other local
// users (group or other write, set-user-ID, set-group-ID, sticky), and
// check the host's modes with lstat and the guest's view with getattr.

// plainMount is a read-write mount without rules but a tmpfs path, and
// with its git protection off (git_metadata = "writable"), so that .git
// and its hooks may be chmodded at all: these tests hold the mode mask
// alone to its promise (the git tests show .git is read-only anyway).
func plainMount() policy.Mount {
	return policy.Mount{Guest: "/workspace", Host: ".", Access: policy.ReadWrite, Tmpfs: []string{"scratch"}, Owner: "agent", GitWritable: true}
}

// side is one way of playing the guest: over 9P through the library,
// or calling the file system's methods directly with what the library
// would not pass. The library drops set-user-ID and set-group-ID bits
// when it decodes a mode, so over 9P the guest's view keeps only the
// rest (seen).
type side struct {
	name   string
	serve  func(t *testing.T, m policy.Mount, work string, lim Limits) (*fsys, p9.File)
	seen   uint32
	viaLib bool
}

var sides = []side{
	{name: "9P", seen: 0o1777, viaLib: true, serve: func(t *testing.T, m policy.Mount, work string, lim Limits) (*fsys, p9.File) {
		s, root := client(t, m, work, lim)
		return s.fs, root
	}},
	{name: "direct", seen: 0o7777, serve: func(t *testing.T, m policy.Mount, work string, lim Limits) (*fsys, p9.File) {
		s, root := direct(t, m, work, lim)
		return s.fs, root
	}},
}

// create makes the file dir/name with mode through a fresh fid of dir
// (a 9P create turns the fid it is given into the new file).
func create(t *testing.T, root p9.File, mode uint32, dir []string, name string) {
	t.Helper()
	d, err := walk(root, dir...)
	if err != nil {
		t.Fatalf("walk %v: %v", dir, err)
	}
	f, _, _, err := d.Create(name, p9.ReadWrite, p9.FileMode(mode), 0, 0)
	if err != nil {
		d.Close()
		t.Fatalf("create %v/%s %o: %v", dir, name, mode, err)
	}
	f.Close()
	d.Close() // the same fid over 9P: a second close is refused, not sent
}

// withUmask runs the rest of the test with the process's umask set to
// mask (the server reads it when it is made).
func withUmask(t *testing.T, mask int) {
	t.Helper()
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// hostMode is the host's type and permission bits of work/rel, not
// following a link.
func hostMode(t *testing.T, work, rel string) uint32 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(work, rel), &st); err != nil {
		t.Fatal(err)
	}
	return st.Mode
}

// guestMode is the permission bits the guest sees for names.
func guestMode(t *testing.T, root p9.File, names ...string) uint32 {
	t.Helper()
	f, err := walk(root, names...)
	if err != nil {
		t.Fatalf("walk %v: %v", names, err)
	}
	defer f.Close()
	_, _, a, err := f.GetAttr(p9.AttrMaskAll)
	if err != nil {
		t.Fatalf("getattr %v: %v", names, err)
	}
	return uint32(a.Mode) & 0o7777
}

func chmod(t *testing.T, root p9.File, mode uint32, names ...string) {
	t.Helper()
	f, err := walk(root, names...)
	if err != nil {
		t.Fatalf("walk %v: %v", names, err)
	}
	defer f.Close()
	if err := f.SetAttr(p9.SetAttrMask{Permissions: true}, p9.SetAttr{Permissions: p9.FileMode(mode)}); err != nil {
		t.Fatalf("chmod %o %v: %v", mode, names, err)
	}
}

// weak says what in a host mode would let another user in, or is a
// set-ID bit the guest put there.
func weak(mode uint32) string {
	var w []string
	if mode&0o020 != 0 {
		w = append(w, "group-writable")
	}
	if mode&0o002 != 0 {
		w = append(w, "other-writable")
	}
	if mode&unix.S_ISUID != 0 {
		w = append(w, "set-user-ID")
	}
	if mode&unix.S_ISGID != 0 {
		w = append(w, "set-group-ID")
	}
	if mode&unix.S_ISVTX != 0 {
		w = append(w, "sticky")
	}
	return strings.Join(w, ", ")
}

// TestGuestChmodNeverWeakensHost: chmod 0777, 04777, 02777, 01777 and
// 07777 by the guest on files, directories, .git and the mount's root
// leave every host entry with at most the umask's bits (022 here), no
// set-ID or sticky bit, and the root as it was; the guest sees what it
// set.
func TestGuestChmodNeverWeakensHost(t *testing.T) {
	withUmask(t, 0o022)
	for _, sd := range sides {
		t.Run(sd.name, func(t *testing.T) {
			_, work := tree(t)
			rootBefore := hostMode(t, work, ".")
			if rootBefore&0o7777 != 0o755 {
				t.Fatalf("the test's root has mode %o; want 755", rootBefore&0o7777)
			}
			fs, root := sd.serve(t, plainMount(), work, Limits{})
			targets := [][]string{nil, {"src"}, {"src", "main.go"}, {".git"}, {".git", "hooks"}, {".git", "hooks", "pre-commit"}, {".git", "HEAD"}}
			for _, mode := range []uint32{0o777, 0o4777, 0o2777, 0o1777, 0o7777, 0o766, 0o700} {
				for _, names := range targets {
					rel := filepath.Join(names...)
					if rel == "" {
						rel = "."
					}
					chmod(t, root, mode, names...)
					got := hostMode(t, work, rel)
					if w := weak(got); w != "" {
						t.Errorf("after the guest's chmod %o %s the host has %o: %s", mode, rel, got&0o7777, w)
					}
					want := mode & 0o755
					if rel == "." {
						want = rootBefore & 0o7777
					}
					if got&0o7777 != want {
						t.Errorf("after the guest's chmod %o %s the host has %o; want %o", mode, rel, got&0o7777, want)
					}
					if g := guestMode(t, root, names...); g != mode&sd.seen {
						t.Errorf("after chmod %o %s the guest sees %o; want %o", mode, rel, g, mode&sd.seen)
					}
				}
			}
			// Back to the host's own mode: nothing is left to remember.
			for _, names := range targets {
				chmod(t, root, 0o755, names...)
			}
			if n := fs.modes.len(); n != 0 {
				t.Errorf("%d modes remembered after every entry was set to 755, the host's mode", n)
			}
		})
	}
}

// TestGuestCreateNeverWeakensHost: files made with create (open with
// O_CREAT) and directories made with mkdir at 0777 and with set-ID and
// sticky bits land on the host at most 0755; the guest sees the mode it
// asked for.
func TestGuestCreateNeverWeakensHost(t *testing.T) {
	withUmask(t, 0o022)
	for _, sd := range sides {
		t.Run(sd.name, func(t *testing.T) {
			_, work := tree(t)
			_, root := sd.serve(t, plainMount(), work, Limits{})
			for i, mode := range []uint32{0o777, 0o4777, 0o2777, 0o1777, 0o7777, 0o666} {
				name := fmt.Sprintf("f%d", i)
				create(t, root, mode, []string{"src"}, name)
				if got := hostMode(t, work, "src/"+name); got&0o7777 != mode&0o755 {
					t.Errorf("create %o: the host file has %o (%s); want %o", mode, got&0o7777, weak(got), mode&0o755)
				}
				if g := guestMode(t, root, "src", name); g != mode&sd.seen {
					t.Errorf("create %o: the guest sees %o; want %o", mode, g, mode&sd.seen)
				}
				d := "d" + name
				if _, err := root.Mkdir(d, p9.FileMode(mode), 0, 0); err != nil {
					t.Fatalf("mkdir %s %o: %v", d, mode, err)
				}
				if got := hostMode(t, work, d); got&0o7777 != mode&0o755 {
					t.Errorf("mkdir %o: the host directory has %o (%s); want %o", mode, got&0o7777, weak(got), mode&0o755)
				}
				if g := guestMode(t, root, d); g != mode&sd.seen {
					t.Errorf("mkdir %o: the guest sees %o; want %o", mode, g, mode&sd.seen)
				}
			}
			// Created over an existing file (no O_EXCL): the file keeps
			// its mode, on the host and in the guest's view.
			create(t, root, 0o777, []string{"src"}, "main.go")
			if got, g := hostMode(t, work, "src/main.go")&0o7777, guestMode(t, root, "src", "main.go"); got != 0o644 || g != 0o644 {
				t.Errorf("create 0777 over an existing 0644 file: host %o, guest %o; want both 644", got, g)
			}
			// tmpfs paths never reach the host: the guest's mode is kept
			// whole.
			create(t, root, 0o4755, []string{"scratch"}, "tool")
			if g := guestMode(t, root, "scratch", "tool"); g != 0o4755&sd.seen {
				t.Errorf("a tmpfs file made 4755 shows %o", g)
			}
			chmod(t, root, 0o7777, "scratch", "tool")
			if g := guestMode(t, root, "scratch", "tool"); g != 0o7777&sd.seen {
				t.Errorf("a tmpfs file chmodded 7777 shows %o", g)
			}
		})
	}
}

// TestGuestModesFollowTheUmask: with the user's umask 077 the guest's
// 0755 lands on the host as 0700, a 0644 file as 0600; the guest sees
// 0755 and 0644.
func TestGuestModesFollowTheUmask(t *testing.T) {
	withUmask(t, 0o077)
	_, work := tree(t)
	_, root := client(t, plainMount(), work, Limits{})
	chmod(t, root, 0o755, "src", "main.go")
	if got := hostMode(t, work, "src/main.go") & 0o7777; got != 0o700 {
		t.Errorf("chmod 755 under umask 077: the host has %o; want 700", got)
	}
	if g := guestMode(t, root, "src", "main.go"); g != 0o755 {
		t.Errorf("chmod 755: the guest sees %o", g)
	}
	create(t, root, 0o644, nil, "new")
	if got, g := hostMode(t, work, "new")&0o7777, guestMode(t, root, "new"); got != 0o600 || g != 0o644 {
		t.Errorf("create 644 under umask 077: host %o, guest %o; want 600 and 644", got, g)
	}
}

// TestGuestModeViewYieldsToHost: what the guest set shows only while the
// host entry has the mode the server left: a chmod on the host wins. A
// directory's host set-group-ID and sticky bits stay as the host set
// them. The remembered modes are bounded, and forgotten with the file.
func TestGuestModeViewYieldsToHost(t *testing.T) {
	withUmask(t, 0o022)
	_, work := tree(t)
	s, root := client(t, plainMount(), work, Limits{Modes: 3})
	fs := s.fs

	chmod(t, root, 0o777, "src", "main.go")
	if err := os.Chmod(filepath.Join(work, "src/main.go"), 0o640); err != nil {
		t.Fatal(err)
	}
	if g := guestMode(t, root, "src", "main.go"); g != 0o640 {
		t.Errorf("after the host's chmod 640 the guest sees %o", g)
	}
	if n := fs.modes.len(); n != 0 {
		t.Errorf("%d modes remembered after the host changed the file's", n)
	}

	// The host's set-group-ID and sticky directory.
	shared := filepath.Join(work, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o755|os.ModeSetgid|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []uint32{0o777, 0o700, 0o1777} {
		chmod(t, root, mode, "shared")
		if got := hostMode(t, work, "shared") & 0o7777; got != 0o3000|mode&0o755 {
			t.Errorf("chmod %o on the host's 3755 directory: the host has %o; want %o", mode, got, 0o3000|mode&0o755)
		}
		if g := guestMode(t, root, "shared"); g != mode {
			t.Errorf("chmod %o: the guest sees %o", mode, g)
		}
	}
	chmod(t, root, 0o755, "shared")
	// A directory made in it inherits set-group-ID on the host, and the
	// guest sees it, as on a disk.
	sh, _ := walk(root, "shared")
	if _, err := sh.Mkdir("sub", 0o777, 0, 0); err != nil {
		t.Fatal(err)
	}
	if got, g := hostMode(t, work, "shared/sub")&0o7777, guestMode(t, root, "shared", "sub"); got != 0o2755 || g != 0o2777 {
		t.Errorf("mkdir 777 in a set-group-ID directory: host %o, guest %o; want 2755 and 2777", got, g)
	}

	// Limits.Modes is 3: "shared" (755 in the guest's view, 3755 on the
	// host) holds one, "shared/sub" another, "a" the last, and "b" finds
	// no room: its host mode shows.
	for _, name := range []string{"a", "b"} {
		create(t, root, 0o644, nil, name)
		chmod(t, root, 0o777, name)
	}
	if g := guestMode(t, root, "a"); g != 0o777 {
		t.Errorf("a: the guest sees %o; want 777", g)
	}
	if got, g := hostMode(t, work, "b")&0o7777, guestMode(t, root, "b"); got != 0o755 || g != 0o755 {
		t.Errorf("b past Limits.Modes: host %o, guest %o; want 755 for both", got, g)
	}
	// Removing "a" makes room.
	if err := root.UnlinkAt("a", 0); err != nil {
		t.Fatal(err)
	}
	chmod(t, root, 0o777, "b")
	if g := guestMode(t, root, "b"); g != 0o777 {
		t.Errorf("b after a was removed: the guest sees %o; want 777", g)
	}
	// A file renamed over is forgotten too.
	create(t, root, 0o644, nil, "c")
	if err := root.RenameAt("c", root, "b"); err != nil {
		t.Fatal(err)
	}
	if n := fs.modes.len(); n != 2 {
		t.Errorf("%d modes remembered after b was replaced; want 2 (shared and shared/sub)", n)
	}
}

// strangerCred makes a local user for the test, removed when it ends,
// and returns its credentials. The test is skipped unless it runs as
// root.
func strangerCred(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making another local user needs root")
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Skip("no useradd to make another local user")
	}
	var b [4]byte
	rand.Read(b[:])
	name := "sbxvfs" + hex.EncodeToString(b[:])
	if out, err := exec.Command("useradd", "--no-create-home", "--shell", "/bin/sh", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v\n%s", name, err, out)
		}
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// TestOtherUserCannotWriteWhatTheGuestOpened plays the finding: the
// guest chmods everything 0777 (and makes a 0777 directory and file),
// then another local user tries to replace .git/hooks, plant a hook,
// write a file and add files to the root. Every attempt fails.
func TestOtherUserCannotWriteWhatTheGuestOpened(t *testing.T) {
	cred := strangerCred(t)
	withUmask(t, 0o022)
	// A tree other users may enter and read, as a home directory with
	// mode 0755 is.
	base, err := os.MkdirTemp("", "sbx-vfs-modes")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	work := filepath.Join(base, "work")
	for name, content := range map[string]string{
		".git/HEAD":             "ref: refs/heads/main\n",
		".git/config":           "[core]\n",
		".git/hooks/pre-commit": "#!/bin/sh\nexit 0\n",
		"src/main.go":           "package main\n",
	} {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	_, root := client(t, plainMount(), work, Limits{})
	for _, names := range [][]string{nil, {".git"}, {".git", "hooks"}, {".git", "hooks", "pre-commit"}, {".git", "config"}, {"src"}, {"src", "main.go"}} {
		chmod(t, root, 0o777, names...)
	}
	if _, err := root.Mkdir("open", 0o777, 0, 0); err != nil {
		t.Fatal(err)
	}
	create(t, root, 0o777, []string{"src"}, "new.sh")

	// In order: with the protection gone, a rename would hide what a
	// later attempt tries.
	attempts := [][2]string{
		{"add a hook", "echo 'curl evil' > .git/hooks/post-checkout"},
		{"rewrite a hook", "echo 'curl evil' > .git/hooks/pre-commit"},
		{"rewrite .git/config", "echo '[core] fsmonitor = evil' >> .git/config"},
		{"add .git/commondir", "echo /tmp/evil > .git/commondir"},
		{"add a file to the root", "echo x > planted"},
		{"write a file", "echo evil >> src/main.go"},
		{"write a created file", "echo evil >> src/new.sh"},
		{"write in a new directory", "echo x > open/planted"},
		{"remove a created file", "rm -f src/new.sh"},
		{"remove a hook", "rm -f .git/hooks/pre-commit"},
		{"replace .git/hooks", "mv .git/hooks .git/hooks.old && mkdir .git/hooks"},
		{"rename in the root", "mv src src.old"},
	}
	asStranger := func(script string) ([]byte, error) {
		cmd := exec.Command("/bin/sh", "-c", "exec 2>&1; "+script)
		cmd.Dir = work
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return cmd.CombinedOutput()
	}
	// The other user reaches the tree: what stops it below is the modes.
	if out, err := asStranger("cat src/main.go .git/hooks/pre-commit >/dev/null"); err != nil {
		t.Fatalf("the other user cannot read the tree, so the test proves nothing: %v: %s", err, out)
	}
	for _, a := range attempts {
		what, script := a[0], a[1]
		if out, err := asStranger(script); err == nil {
			t.Errorf("another user could %s (%s): %s", what, script, out)
		} else if !strings.Contains(string(out), "denied") {
			t.Errorf("%s (%s) failed, but not for want of permission: %s", what, script, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(work, ".git/hooks/pre-commit")); err != nil || string(b) != "#!/bin/sh\nexit 0\n" {
		t.Errorf("the host's hook is now %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(work, "planted")); err == nil {
		t.Errorf("another user planted a file in the root")
	}
	// The guest still sees its modes.
	if g := guestMode(t, root, ".git", "hooks"); g != 0o777 {
		t.Errorf("the guest sees .git/hooks as %o; want 777", g)
	}
}
