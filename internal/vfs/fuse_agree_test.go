//go:build linux

package vfs

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"

	fp "github.com/sbx-dev/sbx/internal/proto/fuseproto"
)

// agreeOps is one guest's sequence of operations on a path; each
// returns what it saw (an errno, and data for reads).
type agreeSide interface {
	stat(rel string) string
	read(rel string) string
	write(rel, data string) string
	create(rel string) string
	mkdir(rel string) string
	symlink(rel, target string) string
	link(from, to string) string
	rename(from, to string) string
	chmod(rel string, mode uint32) string
	truncate(rel string, size uint64) string
	unlink(rel string, dir bool) string
}

func result(e syscall.Errno, data string) string {
	if e != 0 {
		return e.Error()
	}
	return "ok " + data
}

// over9P plays the guest through the 9P library's client.
type over9P struct {
	t    *testing.T
	root p9.File
}

func (s over9P) walk(rel string) (p9.File, error) {
	if rel == "" {
		return walk(s.root)
	}
	return walk(s.root, strings.Split(rel, "/")...)
}

func (s over9P) dirOf(rel string) (p9.File, string, error) {
	dir, name := splitRel(rel)
	d, err := s.walk(dir)
	return d, name, err
}

func (s over9P) stat(rel string) string {
	f, err := s.walk(rel)
	if err != nil {
		return result(errno(err), "")
	}
	defer f.Close()
	_, _, a, err := f.GetAttr(p9.AttrMaskAll)
	return result(errno(err), fmt.Sprintf("%o %d", a.Mode, a.Size))
}

func (s over9P) read(rel string) string {
	f, err := s.walk(rel)
	if err != nil {
		return result(errno(err), "")
	}
	defer f.Close()
	if _, _, err := f.Open(p9.ReadOnly); err != nil {
		return result(errno(err), "")
	}
	buf := make([]byte, 4096)
	n, err := f.ReadAt(buf, 0)
	if n > 0 {
		err = nil
	}
	return result(errno(err), string(buf[:n]))
}

func (s over9P) write(rel, data string) string {
	f, err := s.walk(rel)
	if err != nil {
		return result(errno(err), "")
	}
	defer f.Close()
	if _, _, err := f.Open(p9.WriteOnly); err != nil {
		return result(errno(err), "")
	}
	_, err = f.WriteAt([]byte(data), 0)
	return result(errno(err), "")
}

func (s over9P) create(rel string) string {
	d, name, err := s.dirOf(rel)
	if err != nil {
		return result(errno(err), "")
	}
	f, _, _, err := d.Create(name, p9.WriteOnly|dotlExcl, 0o644, 0, 0)
	if err == nil {
		f.Close()
	} else {
		d.Close()
	}
	return result(errno(err), "")
}

func (s over9P) mkdir(rel string) string {
	d, name, err := s.dirOf(rel)
	if err != nil {
		return result(errno(err), "")
	}
	defer d.Close()
	_, err = d.Mkdir(name, 0o755, 0, 0)
	return result(errno(err), "")
}

func (s over9P) symlink(rel, target string) string {
	d, name, err := s.dirOf(rel)
	if err != nil {
		return result(errno(err), "")
	}
	defer d.Close()
	_, err = d.Symlink(target, name, 0, 0)
	return result(errno(err), "")
}

func (s over9P) link(from, to string) string {
	t, err := s.walk(from)
	if err != nil {
		return result(errno(err), "")
	}
	defer t.Close()
	d, name, err := s.dirOf(to)
	if err != nil {
		return result(errno(err), "")
	}
	defer d.Close()
	return result(errno(d.Link(t, name)), "")
}

func (s over9P) rename(from, to string) string {
	od, oname, err := s.dirOf(from)
	if err != nil {
		return result(errno(err), "")
	}
	defer od.Close()
	nd, nname, err := s.dirOf(to)
	if err != nil {
		return result(errno(err), "")
	}
	defer nd.Close()
	return result(errno(od.RenameAt(oname, nd, nname)), "")
}

func (s over9P) chmod(rel string, mode uint32) string {
	f, err := s.walk(rel)
	if err != nil {
		return result(errno(err), "")
	}
	defer f.Close()
	return result(errno(f.SetAttr(p9.SetAttrMask{Permissions: true}, p9.SetAttr{Permissions: p9.FileMode(mode)})), "")
}

func (s over9P) truncate(rel string, size uint64) string {
	f, err := s.walk(rel)
	if err != nil {
		return result(errno(err), "")
	}
	defer f.Close()
	return result(errno(f.SetAttr(p9.SetAttrMask{Size: true}, p9.SetAttr{Size: size})), "")
}

func (s over9P) unlink(rel string, dir bool) string {
	d, name, err := s.dirOf(rel)
	if err != nil {
		return result(errno(err), "")
	}
	defer d.Close()
	var flags uint32
	if dir {
		flags = unix.AT_REMOVEDIR
	}
	return result(errno(d.UnlinkAt(name, flags)), "")
}

// overFUSE plays the guest through FUSE requests.
type overFUSE struct{ c *fuseClient }

func (s overFUSE) stat(rel string) string {
	id, e := s.c.walkTo(rel)
	if e != 0 {
		return result(e, "")
	}
	e, p := s.c.call(fp.OpGetattr, id, fp.GetattrIn{})
	if e != 0 {
		return result(e, "")
	}
	// fuse_attr_out: valid 8, nsec 4, dummy 4, then fuse_attr: size at 8, mode at 16+60.
	return result(0, fmt.Sprintf("%o %d", le32(p[16+60:]), le64(p[16+8:])))
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func (s overFUSE) open(rel string, flags uint32) (uint64, syscall.Errno) {
	id, e := s.c.walkTo(rel)
	if e != 0 {
		return 0, e
	}
	e, p := s.c.call(fp.OpOpen, id, fp.OpenIn{Flags: flags})
	if e != 0 {
		return 0, e
	}
	return le64(p), 0
}

func (s overFUSE) read(rel string) string {
	fh, e := s.open(rel, unix.O_RDONLY)
	if e != 0 {
		return result(e, "")
	}
	defer s.c.call(fp.OpRelease, 0, fp.ReleaseIn{Fh: fh})
	e, p := s.c.call(fp.OpRead, 0, fp.ReadIn{Fh: fh, Size: 4096})
	return result(e, string(p))
}

func (s overFUSE) write(rel, data string) string {
	fh, e := s.open(rel, unix.O_WRONLY)
	if e != 0 {
		return result(e, "")
	}
	defer s.c.call(fp.OpRelease, 0, fp.ReleaseIn{Fh: fh})
	e, _ = s.c.call(fp.OpWrite, 0, fp.WriteIn{Fh: fh, Size: uint32(len(data)), Data: []byte(data)})
	return result(e, "")
}

func (s overFUSE) create(rel string) string {
	d, name, e := s.c.parentOf(rel)
	if e != 0 {
		return result(e, "")
	}
	e, p := s.c.call(fp.OpCreate, d, fp.CreateIn{Flags: unix.O_WRONLY | unix.O_EXCL, Mode: unix.S_IFREG | 0o644, Name: name})
	if e == 0 {
		s.c.call(fp.OpRelease, 0, fp.ReleaseIn{Fh: le64(p[fp.EntryOutSize:])})
	}
	return result(e, "")
}

func (s overFUSE) mkdir(rel string) string {
	d, name, e := s.c.parentOf(rel)
	if e != 0 {
		return result(e, "")
	}
	e, _ = s.c.call(fp.OpMkdir, d, fp.MkdirIn{Mode: 0o755, Name: name})
	return result(e, "")
}

func (s overFUSE) symlink(rel, target string) string {
	d, name, e := s.c.parentOf(rel)
	if e != 0 {
		return result(e, "")
	}
	e, _ = s.c.call(fp.OpSymlink, d, fp.SymlinkIn{Name: name, Target: target})
	return result(e, "")
}

func (s overFUSE) link(from, to string) string {
	t, e := s.c.walkTo(from)
	if e != 0 {
		return result(e, "")
	}
	d, name, e := s.c.parentOf(to)
	if e != 0 {
		return result(e, "")
	}
	e, _ = s.c.call(fp.OpLink, d, fp.LinkIn{OldNodeID: t, Name: name})
	return result(e, "")
}

func (s overFUSE) rename(from, to string) string {
	od, oname, e := s.c.parentOf(from)
	if e != 0 {
		return result(e, "")
	}
	nd, nname, e := s.c.parentOf(to)
	if e != 0 {
		return result(e, "")
	}
	e, _ = s.c.call(fp.OpRename, od, fp.RenameIn{NewDir: nd, OldName: oname, NewName: nname})
	return result(e, "")
}

func (s overFUSE) setattr(rel string, in fp.SetattrIn) string {
	id, e := s.c.walkTo(rel)
	if e != 0 {
		return result(e, "")
	}
	e, _ = s.c.call(fp.OpSetattr, id, in)
	return result(e, "")
}

func (s overFUSE) chmod(rel string, mode uint32) string {
	return s.setattr(rel, fp.SetattrIn{Valid: fp.SetattrMode, Mode: mode})
}

func (s overFUSE) truncate(rel string, size uint64) string {
	return s.setattr(rel, fp.SetattrIn{Valid: fp.SetattrSize, Size: size})
}

func (s overFUSE) unlink(rel string, dir bool) string {
	d, name, e := s.c.parentOf(rel)
	if e != 0 {
		return result(e, "")
	}
	op := fp.OpUnlink
	if dir {
		op = fp.OpRmdir
	}
	e, _ = s.c.call(op, d, fp.NameIn{Name: name})
	return result(e, "")
}

// The same operations through 9P and through FUSE see the same
// results and errnos, on plain, hidden, read-only, tmpfs and git paths.
func TestFUSEAgreesWith9P(t *testing.T) {
	_, work9 := tree(t)
	_, root := client(t, workspace(), work9, Limits{})
	_, workF := tree(t)
	c, _ := newFUSEClient(t, workspace(), workF, Limits{})
	sides := []agreeSide{over9P{t, root}, overFUSE{c}}
	paths := []string{
		"src/main.go", "src/missing", ".env", ".env.local", ".git/config", ".git/HEAD", ".git/hooks/pre-commit",
		"src/certs/server.pem", "secrets/db.txt", "secrets", "vendor/lib.go", "vendor", "node_modules/host-junk",
		"node_modules/new", "build/out.txt", "build/cache/host-cached", "build/cache/new", "src", ".git/newfile",
		"src/.git", "HEAD",
	}
	type step struct {
		what string
		do   func(s agreeSide, rel string) string
	}
	steps := []step{
		{"stat", func(s agreeSide, rel string) string { return s.stat(rel) }},
		{"read", func(s agreeSide, rel string) string { return s.read(rel) }},
		{"create", func(s agreeSide, rel string) string { return s.create(rel) }},
		{"stat after create", func(s agreeSide, rel string) string { return s.stat(rel) }},
		{"write", func(s agreeSide, rel string) string { return s.write(rel, "written\n") }},
		{"read after write", func(s agreeSide, rel string) string { return s.read(rel) }},
		{"chmod", func(s agreeSide, rel string) string { return s.chmod(rel, 0o600) }},
		{"stat after chmod", func(s agreeSide, rel string) string { return s.stat(rel) }},
		{"chmod set-user-ID", func(s agreeSide, rel string) string { return s.chmod(rel, 0o4755) }},
		{"stat after chmod set-user-ID", func(s agreeSide, rel string) string { return s.stat(rel) }},
		{"chmod set-group-ID", func(s agreeSide, rel string) string { return s.chmod(rel, 0o2777) }},
		{"stat after chmod set-group-ID", func(s agreeSide, rel string) string { return s.stat(rel) }},
		{"chmod sticky", func(s agreeSide, rel string) string { return s.chmod(rel, 0o1700) }},
		{"stat after chmod sticky", func(s agreeSide, rel string) string { return s.stat(rel) }},
		{"truncate", func(s agreeSide, rel string) string { return s.truncate(rel, 3) }},
		{"link", func(s agreeSide, rel string) string { return s.link(rel, "src/hardlink") }},
		{"unlink the link", func(s agreeSide, rel string) string { return s.unlink("src/hardlink", false) }},
		{"link into", func(s agreeSide, rel string) string { return s.link("src/main.go", rel+"-l") }},
		{"rename away", func(s agreeSide, rel string) string { return s.rename(rel, "src/renamed") }},
		{"rename back", func(s agreeSide, rel string) string { return s.rename("src/renamed", rel) }},
		{"rename onto", func(s agreeSide, rel string) string { return s.rename("build/out.txt", rel+"-r") }},
		{"rename onto back", func(s agreeSide, rel string) string { return s.rename(rel+"-r", "build/out.txt") }},
		{"symlink", func(s agreeSide, rel string) string { return s.symlink(rel+"-s", "../outside.txt") }},
		{"mkdir", func(s agreeSide, rel string) string { return s.mkdir(rel + "-d") }},
		{"rmdir", func(s agreeSide, rel string) string { return s.unlink(rel+"-d", true) }},
		{"unlink", func(s agreeSide, rel string) string { return s.unlink(rel, false) }},
		{"stat after unlink", func(s agreeSide, rel string) string { return s.stat(rel) }},
	}
	for _, rel := range paths {
		for _, st := range steps {
			a, b := st.do(sides[0], rel), st.do(sides[1], rel)
			if a != b {
				t.Errorf("%s %s: 9P %q, FUSE %q", st.what, rel, a, b)
			}
		}
	}
	s9, sF := snapshot(t, work9), snapshot(t, workF)
	for k, v := range s9 {
		if sF[k] != v && !strings.HasPrefix(v, "L") {
			t.Errorf("host after 9P has %s %q, after FUSE %q", k, v, sF[k])
		}
	}
	for k := range sF {
		if _, ok := s9[k]; !ok {
			t.Errorf("host after FUSE has %s, after 9P not", k)
		}
	}
}
