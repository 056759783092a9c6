//go:build linux

package vfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"
)

// What git, npm and compilers do on a mount works, as the mount's owner
// sees it.
func TestEverydayOperations(t *testing.T) {
	_, work := tree(t)
	_, root := client(t, workspace(), work, Limits{})

	_, _, attr, err := root.GetAttr(p9.AttrMaskAll)
	if err != nil {
		t.Fatal(err)
	}
	if attr.UID != 1000 || attr.GID != 1001 {
		t.Errorf("root owned by %d:%d; want the mount's owner 1000:1001", attr.UID, attr.GID)
	}

	// A created file takes over the client's directory fid (9P's
	// create), so each create walks a fresh one.
	dir, err := walk(root, "src")
	if err != nil {
		t.Fatal(err)
	}
	f, _, _, err := dir.Create("new.go", p9.ReadWrite|dotlExcl, 0o4755, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("package main // new\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.FSync(); err != nil {
		t.Errorf("fsync: %v", err)
	}
	f.Close()
	host := filepath.Join(work, "src", "new.go")
	st, err := os.Stat(host)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("new.go has mode %v on the host; set-user-ID must not reach it", st.Mode())
	}
	var hs unix.Stat_t
	if err := unix.Stat(host, &hs); err != nil || int(hs.Uid) != os.Getuid() {
		t.Errorf("new.go is owned by %d on the host (%v); want the server's user %d", hs.Uid, err, os.Getuid())
	}
	src, err := walk(root, "src")
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, err = src.Create("new.go", p9.ReadWrite|dotlExcl, 0o644, 0, 0)
	wantErrno(t, "exclusive create of an existing file", err, unix.EEXIST)

	nf, err := walk(src, "new.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what  string
		valid p9.SetAttrMask
		attr  p9.SetAttr
	}{
		{"chmod", p9.SetAttrMask{Permissions: true}, p9.SetAttr{Permissions: 0o600}},
		{"chown (ignored)", p9.SetAttrMask{UID: true, GID: true}, p9.SetAttr{UID: 0, GID: 0}},
		{"truncate", p9.SetAttrMask{Size: true}, p9.SetAttr{Size: 7}},
		{"utimes", p9.SetAttrMask{ATime: true, MTime: true, ATimeNotSystemTime: true, MTimeNotSystemTime: true},
			p9.SetAttr{ATimeSeconds: 1_000_000, MTimeSeconds: 1_000_000}},
	} {
		if err := nf.SetAttr(c.valid, c.attr); err != nil {
			t.Errorf("%s: %v", c.what, err)
		}
	}
	st, _ = os.Stat(host)
	if st.Mode().Perm() != 0o600 || st.Size() != 7 || st.ModTime().Unix() != 1_000_000 {
		t.Errorf("after chmod, truncate and utimes the host has %v, %d bytes, %v", st.Mode(), st.Size(), st.ModTime())
	}
	_, _, attr, _ = nf.GetAttr(p9.AttrMaskAll)
	if attr.UID != 1000 || attr.Mode.Permissions() != 0o600 || attr.Size != 7 {
		t.Errorf("the guest sees uid %d, mode %v, %d bytes", attr.UID, attr.Mode, attr.Size)
	}

	if _, err := src.Mkdir("pkg", 0o755, 0, 0); err != nil {
		t.Fatal(err)
	}
	pkg, _ := walk(src, "pkg")
	if err := src.RenameAt("new.go", pkg, "moved.go"); err != nil {
		t.Fatalf("rename: %v", err)
	}
	// The fid followed the rename.
	if _, _, _, err := nf.GetAttr(p9.AttrMaskAll); err != nil {
		t.Errorf("stat of a renamed file through its fid: %v", err)
	}
	moved, _ := walk(pkg, "moved.go")
	if err := pkg.Link(moved, "hard.go"); err != nil {
		t.Errorf("link: %v", err)
	}
	if _, err := pkg.Symlink("moved.go", "soft.go", 0, 0); err != nil {
		t.Errorf("symlink: %v", err)
	}
	if l, err := os.Readlink(filepath.Join(work, "src", "pkg", "soft.go")); err != nil || l != "moved.go" {
		t.Errorf("the host link is %q, %v", l, err)
	}
	if got := list(t, root, "src", "pkg"); len(got) != 3 {
		t.Errorf("src/pkg lists %v; want hard.go, moved.go, soft.go", got)
	}
	wantErrno(t, "rmdir a directory with files", src.UnlinkAt("pkg", unix.AT_REMOVEDIR), unix.ENOTEMPTY)
	for _, n := range []string{"hard.go", "moved.go", "soft.go"} {
		if err := pkg.UnlinkAt(n, 0); err != nil {
			t.Errorf("unlink %s: %v", n, err)
		}
	}
	if err := src.UnlinkAt("pkg", unix.AT_REMOVEDIR); err != nil {
		t.Errorf("rmdir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(work, "src", "pkg")); !os.IsNotExist(err) {
		t.Errorf("src/pkg is still on the host: %v", err)
	}
	if fs, err := root.StatFS(); err != nil || fs.Type != 0x01021997 {
		t.Errorf("statfs = %+v, %v", fs, err)
	}
	// Host edits are seen at once.
	if err := os.WriteFile(filepath.Join(work, "src", "main.go"), []byte("package edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := readAll(t, root, "src", "main.go"); err != nil || s != "package edited\n" {
		t.Errorf("after a host edit the guest reads %q, %v", s, err)
	}
}

// A read-only mount still has its tmpfs paths.
func TestReadOnlyMountScratch(t *testing.T) {
	_, work := tree(t)
	m := workspace()
	m.Access = "ro"
	_, root := client(t, m, work, Limits{})
	nm, err := walk(root, "node_modules")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nm.Mkdir("x", 0o755, 0, 0); err != nil {
		t.Errorf("mkdir in tmpfs of an ro mount: %v", err)
	}
}

// Set-user-ID and set-group-ID bits never reach the host, by create or
// chmod (called directly: the 9P library may mask them on its own).
func TestDirectSetIDStripped(t *testing.T) {
	_, work := tree(t)
	_, root := direct(t, workspace(), work, Limits{})
	f, _, _, err := root.Create("tool", p9.WriteOnly, 0o6755, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	check := func(what string) {
		t.Helper()
		st, err := os.Stat(filepath.Join(work, "tool"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("after %s the host file has mode %v", what, st.Mode())
		}
	}
	check("create with 6755")
	_, tool, err := root.Walk([]string{"tool"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tool.SetAttr(p9.SetAttrMask{Permissions: true}, p9.SetAttr{Permissions: 0o6755}); err != nil {
		t.Fatal(err)
	}
	check("chmod 6755")
}

// Directory entries carry Linux's d_type, which the kernel's client
// passes to readdir(3) unchanged.
func TestDirentTypes(t *testing.T) {
	_, work := tree(t)
	if err := os.Symlink("main.go", filepath.Join(work, "src", "link")); err != nil {
		t.Fatal(err)
	}
	_, root := client(t, workspace(), work, Limits{})
	nm, _ := walk(root, "node_modules")
	if _, err := nm.Mkdir("pkg", 0o755, 0, 0); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint8{".": unix.DT_DIR, "..": unix.DT_DIR, "src": unix.DT_DIR, "node_modules": unix.DT_DIR,
		"main.go": unix.DT_REG, "link": unix.DT_LNK, "pkg": unix.DT_DIR}
	for _, dir := range [][]string{nil, {"src"}, {"node_modules"}} {
		d, err := walk(root, dir...)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := d.Open(p9.ReadOnly); err != nil {
			t.Fatal(err)
		}
		ents, err := d.Readdir(0, 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if w, ok := want[e.Name]; ok && uint8(e.Type) != w {
				t.Errorf("%v/%s has d_type %d; want %d", dir, e.Name, e.Type, w)
			}
		}
		d.Close()
	}
}
