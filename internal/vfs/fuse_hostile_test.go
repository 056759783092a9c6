//go:build linux

package vfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	fp "github.com/sbx-dev/sbx/internal/proto/fuseproto"
)

// A guest speaking FUSE itself gets an errno for every malformed or
// out-of-bounds request, never a crash, and cannot grow what the
// server holds beyond the limits.
func TestFUSEHostileRequests(t *testing.T) {
	_, work := tree(t)
	c, _ := newFUSEClient(t, workspace(), work, Limits{Files: 16, OpenFiles: 2})
	want := func(what string, got, want syscall.Errno) {
		t.Helper()
		if got != want {
			t.Errorf("%s: got %v, want %v", what, got, want)
		}
	}
	hdr := func(op fp.Opcode, u, node uint64) fp.InHeader {
		return fp.InHeader{Opcode: op, Unique: u, NodeID: node}
	}

	// Framing.
	out := make([]byte, c.f.MaxRequest())
	if n := c.f.Handle([][]byte{make([]byte, 20)}, [][]byte{out}); n != 0 {
		t.Errorf("a truncated header got a reply of %d bytes", n)
	}
	lie := fp.EncodeRequest(hdr(fp.OpGetattr, 900, 1), fp.GetattrIn{})
	le := func(b []byte, v uint32) { b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24) }
	le(lie, 4000)
	e, _ := c.raw(900, lie)
	want("header length that lies", e, unix.EINVAL)
	// The same request split over buffers is one request.
	split := fp.EncodeRequest(hdr(fp.OpGetattr, 901, 1), fp.GetattrIn{})
	e, _ = c.raw(901, split[:7], split[7:41], split[41:])
	want("a request in three buffers", e, 0)
	huge := make([]byte, c.f.MaxRequest()+1)
	copy(huge, fp.EncodeRequest(hdr(fp.OpGetattr, 902, 1), fp.GetattrIn{}))
	e, _ = c.raw(902, huge)
	want("a request beyond the largest", e, unix.EINVAL)
	tiny := fp.EncodeRequest(hdr(fp.OpRead, 903, 1), fp.ReadIn{Size: 100})
	if n := c.f.Handle([][]byte{tiny}, [][]byte{make([]byte, 8)}); n != 0 {
		t.Errorf("a reply written into 8 bytes: %d", n)
	}

	// Names and counts.
	e, _ = c.call(fp.OpLookup, 1, fp.NameIn{Name: "a/b"})
	want("lookup with a slash", e, unix.EINVAL)
	e, _ = c.call(fp.OpLookup, 1, fp.NameIn{Name: strings.Repeat("x", 300)})
	want("lookup of a long name", e, unix.ENAMETOOLONG)
	e, _ = c.call(fp.OpLookup, 1, fp.NameIn{Name: ".."})
	want("lookup of ..", e, unix.EINVAL)
	e, _ = c.call(fp.OpRead, 1, fp.ReadIn{Fh: 1, Size: 1 << 31})
	want("read of 2 GiB", e, unix.EINVAL)
	bf := fp.EncodeRequest(hdr(fp.OpBatchForget, 904, 0), fp.BatchForgetIn{Forgets: []fp.ForgetOne{{NodeID: 1, Nlookup: 1}}})
	le(bf[fp.InHeaderSize:], 1<<31)
	if e, p := c.raw(904, bf); e != 0 || p != nil {
		t.Errorf("a lying BATCH_FORGET was answered: %v", e)
	}

	// Unknown node IDs and handles; IDs are not reused after a forget.
	e, _ = c.call(fp.OpGetattr, 12345, fp.GetattrIn{})
	want("getattr of an unknown node", e, unix.ESTALE)
	e, _ = c.call(fp.OpRead, 1, fp.ReadIn{Fh: 777, Size: 10})
	want("read of an unknown handle", e, unix.EBADF)
	e, _ = c.call(fp.OpRelease, 1, fp.ReleaseIn{Fh: 777})
	want("release of an unknown handle", e, unix.EBADF)
	e, p := c.call(fp.OpLookup, 1, fp.NameIn{Name: "src"})
	want("lookup src", e, 0)
	src := nodeOf(p)
	c.call(fp.OpForget, src, fp.ForgetIn{Nlookup: 1})
	e, _ = c.call(fp.OpGetattr, src, fp.GetattrIn{})
	want("getattr of a forgotten node", e, unix.ESTALE)
	e, p = c.call(fp.OpLookup, 1, fp.NameIn{Name: "src"})
	if e != 0 || nodeOf(p) == src {
		t.Errorf("src looked up again: node %d (%v); want a new one, not %d", nodeOf(p), e, src)
	}
	src = nodeOf(p)
	c.call(fp.OpForget, 1, fp.ForgetIn{Nlookup: 1 << 40})
	e, _ = c.call(fp.OpGetattr, 1, fp.GetattrIn{})
	want("the root after a forget", e, 0)
	e, _ = c.call(fp.OpRename2, 1, fp.RenameIn{NewDir: 1, Flags: 1, OldName: "src", NewName: "x"})
	want("RENAME2 with a flag", e, unix.EINVAL)
	e, _ = c.call(fp.OpMknod, src, fp.MknodIn{Mode: unix.S_IFCHR | 0o666, Rdev: 0x103, Name: "null"})
	want("mknod of a device", e, unix.EPERM)
	e, _ = c.call(fp.OpGetxattr, src, fp.GetxattrIn{Size: 64, Name: "security.capability"})
	want("getxattr", e, unix.ENODATA)
	e, _ = c.call(fp.OpSetxattr, src, fp.SetxattrIn{Size: 1, Name: "user.x", Value: []byte("x")})
	want("setxattr", e, unix.EOPNOTSUPP)
	e, _ = c.call(fp.OpIoctl, src, nil)
	want("ioctl", e, unix.ENOSYS)
	e, _ = c.call(fp.OpInit, 0, fp.InitIn{Major: 7, Minor: 36})
	want("a second INIT", e, unix.EPROTO)

	// Table exhaustion: handles count against Limits.OpenFiles, nodes
	// against Limits.Files.
	var fhs []uint64
	e = 0
	for i := 0; i < 10 && e == 0; i++ {
		e, p = c.call(fp.OpOpendir, 1, fp.OpenIn{})
		if e == 0 {
			fhs = append(fhs, le64(p))
		}
	}
	want("handles beyond Limits.OpenFiles", e, unix.EMFILE)
	if len(fhs) != 2 {
		t.Errorf("%d handles opened; want 2", len(fhs))
	}
	for _, fh := range fhs {
		e, _ = c.call(fp.OpReleasedir, 1, fp.ReleaseIn{Fh: fh})
		want("releasedir", e, 0)
	}
	e, _ = c.call(fp.OpOpendir, 1, fp.OpenIn{})
	want("opendir after the releases", e, 0)

	var full syscall.Errno
	for i := 0; i < 40 && full == 0; i++ {
		name := "f" + strings.Repeat("x", i)
		full, _ = c.call(fp.OpMkdir, src, fp.MkdirIn{Mode: 0o755, Name: name})
	}
	want("nodes beyond Limits.Files", full, unix.ENFILE)
	// DESTROY drops everything; requests before the next INIT fail.
	e, _ = c.call(fp.OpDestroy, 1, nil)
	want("destroy", e, 0)
	e, _ = c.call(fp.OpGetattr, 1, fp.GetattrIn{})
	want("getattr after destroy", e, unix.EIO)
	if n := c.f.fs.files.Load(); n != 0 {
		t.Errorf("%d files held after DESTROY", n)
	}
}

// A READDIRPLUS counts a lookup for every entry it returns with a node,
// and none for "." and "..": forgetting each once drops them all.
func TestFUSEReaddirplusCounts(t *testing.T) {
	_, work := tree(t)
	c, _ := newFUSEClient(t, workspace(), work, Limits{})
	e, p := c.call(fp.OpOpendir, 1, fp.OpenIn{})
	if e != 0 {
		t.Fatal(e)
	}
	fh := le64(p)
	e, p = c.call(fp.OpReaddirplus, 1, fp.ReadIn{Fh: fh, Size: 4096})
	if e != 0 {
		t.Fatal(e)
	}
	var nodes []uint64
	var seen []string
	for len(p) >= fp.EntryOutSize+24 {
		node := le64(p)
		namelen := int(le32(p[fp.EntryOutSize+16:]))
		name := string(p[fp.EntryOutSize+24 : fp.EntryOutSize+24+namelen])
		seen = append(seen, name)
		if (name == "." || name == "..") != (node == 0) {
			t.Errorf("entry %q has node %d", name, node)
		}
		if node != 0 {
			nodes = append(nodes, node)
		}
		p = p[fp.DirentplusSize(name):]
	}
	if strings.Contains(strings.Join(seen, " "), ".env") {
		t.Errorf("READDIRPLUS lists %v", seen)
	}
	if len(nodes) != 5 {
		t.Errorf("READDIRPLUS gave %d nodes (%v); want 5", len(nodes), seen)
	}
	c.call(fp.OpReleasedir, 1, fp.ReleaseIn{Fh: fh})
	before := c.f.fs.files.Load()
	for _, n := range nodes {
		c.call(fp.OpForget, n, fp.ForgetIn{Nlookup: 1})
	}
	if got := c.f.fs.files.Load(); got != before-int64(len(nodes)) {
		t.Errorf("after forgetting each node once %d files are held; want %d", got, before-int64(len(nodes)))
	}
}

// FuzzFUSEHandle sends a session arbitrary requests after an INIT.
func FuzzFUSEHandle(f *testing.F) {
	for _, s := range []struct {
		op   fp.Opcode
		node uint64
		args any
	}{
		{fp.OpLookup, 1, fp.NameIn{Name: "src"}},
		{fp.OpGetattr, 1, fp.GetattrIn{}},
		{fp.OpOpendir, 1, fp.OpenIn{}},
		{fp.OpReaddirplus, 1, fp.ReadIn{Fh: 1, Size: 4096}},
		{fp.OpReaddir, 1, fp.ReadIn{Fh: 1, Size: 100}},
		{fp.OpCreate, 1, fp.CreateIn{Flags: 2, Mode: 0o100644, Name: "n"}},
		{fp.OpWrite, 1, fp.WriteIn{Fh: 1, Size: 3, Data: []byte("abc")}},
		{fp.OpRead, 1, fp.ReadIn{Fh: 1, Size: 3}},
		{fp.OpSetattr, 2, fp.SetattrIn{Valid: fp.SetattrSize, Size: 1 << 40}},
		{fp.OpRename, 1, fp.RenameIn{NewDir: 2, OldName: "src", NewName: "s"}},
		{fp.OpSymlink, 1, fp.SymlinkIn{Name: "l", Target: "/etc/passwd"}},
		{fp.OpMkdir, 1, fp.MkdirIn{Mode: 0o755, Name: "node_modules"}},
		{fp.OpBatchForget, 0, fp.BatchForgetIn{Forgets: []fp.ForgetOne{{NodeID: 2, Nlookup: 1}}}},
		{fp.OpDestroy, 1, nil},
	} {
		f.Add(fp.EncodeRequest(fp.InHeader{Opcode: s.op, Unique: 5, NodeID: s.node}, s.args))
	}
	work := f.TempDir()
	for name, content := range map[string]string{"src/main.go": "package main\n", ".env": "TOKEN=x\n", "vendor/lib.go": "package lib\n"} {
		if err := os.MkdirAll(filepath.Join(work, filepath.Dir(name)), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	c, _ := newFUSEClient(f, workspace(), work, Limits{Files: 64, OpenFiles: 8, TmpfsBytes: 1 << 20})
	out := make([]byte, c.f.MaxRequest())
	initReq := fp.EncodeRequest(fp.InHeader{Opcode: fp.OpInit, Unique: 1}, fp.InitIn{Major: 7, Minor: 36})
	f.Fuzz(func(t *testing.T, b []byte) {
		n := c.f.Handle([][]byte{b}, [][]byte{out})
		if n > 0 {
			if l, _, _, ok := fp.OutHeader(out[:n]); !ok || int(l) != n {
				t.Fatalf("reply of %d bytes says %d", n, l)
			}
		}
		if c.f.fs.files.Load() > 64 || c.f.fs.open.Load() > 8 {
			t.Fatalf("files %d, open %d beyond the limits", c.f.fs.files.Load(), c.f.fs.open.Load())
		}
		// Keep the session initialized for the next input.
		c.f.Handle([][]byte{initReq}, [][]byte{out})
	})
}

// Over FUSE too, a tmpfs file unlinked while a handle holds it open
// counts against Limits.TmpfsBytes until the handle is released.
func TestFUSETmpfsLimitCountsUnlinkedOpenFiles(t *testing.T) {
	_, work := tree(t)
	const limit = 1 << 20
	c, _ := newFUSEClient(t, workspace(), work, Limits{TmpfsBytes: limit, OpenFiles: 16})
	nm, e := c.walkTo("node_modules")
	if e != 0 {
		t.Fatal(e)
	}
	chunk := make([]byte, 64<<10)
	held := 0
	var fhs []uint64
	for i := 0; i < 8; i++ {
		name := "big" + strings.Repeat("x", i)
		e, p := c.call(fp.OpCreate, nm, fp.CreateIn{Flags: unix.O_RDWR | unix.O_EXCL, Mode: unix.S_IFREG | 0o644, Name: name})
		if e != 0 {
			break
		}
		fh := le64(p[fp.EntryOutSize:])
		fhs = append(fhs, fh)
		for off := 0; off < 12*len(chunk); off += len(chunk) {
			if e, _ := c.call(fp.OpWrite, 0, fp.WriteIn{Fh: fh, Offset: uint64(off), Size: uint32(len(chunk)), Data: chunk}); e != 0 {
				break
			}
			held += len(chunk)
		}
		if e, _ := c.call(fp.OpUnlink, nm, fp.NameIn{Name: name}); e != 0 {
			t.Fatalf("unlink %s: %v", name, e)
		}
	}
	if held > limit {
		t.Errorf("open, unlinked tmpfs files hold %d bytes; the limit is %d", held, limit)
	}
	for _, fh := range fhs {
		c.call(fp.OpRelease, 0, fp.ReleaseIn{Fh: fh})
	}
	e, p := c.call(fp.OpCreate, nm, fp.CreateIn{Flags: unix.O_RDWR | unix.O_EXCL, Mode: unix.S_IFREG | 0o644, Name: "again"})
	if e != 0 {
		t.Fatalf("create after the releases: %v", e)
	}
	half := make([]byte, 256<<10)
	for off := 0; off < limit/2; off += len(half) {
		if e, _ := c.call(fp.OpWrite, 0, fp.WriteIn{Fh: le64(p[fp.EntryOutSize:]), Offset: uint64(off), Size: uint32(len(half)), Data: half}); e != 0 {
			t.Fatalf("writing half the limit after the releases: %v", e)
		}
	}
}

// A handle reads and writes only as it was opened, in memory as on the
// host (where the host's descriptor refuses): a handle opened read-only,
// or a directory's, takes no write, and one opened write-only gives no
// read. The 9P library refuses the same before the file system sees it.
func TestFUSEHandlesKeepTheirOpenMode(t *testing.T) {
	_, work := tree(t)
	m := workspace()
	m.ReadOnly = append(m.ReadOnly, "build")
	c, _ := newFUSEClient(t, m, work, Limits{})
	nm, e := c.walkTo("node_modules")
	if e != 0 {
		t.Fatal(e)
	}
	e, p := c.call(fp.OpCreate, nm, fp.CreateIn{Flags: unix.O_WRONLY | unix.O_EXCL, Mode: unix.S_IFREG | 0o644, Name: "f"})
	if e != 0 {
		t.Fatal(e)
	}
	wfh := le64(p[fp.EntryOutSize:])
	if e, _ := c.call(fp.OpWrite, 0, fp.WriteIn{Fh: wfh, Size: 3, Data: []byte("abc")}); e != 0 {
		t.Fatalf("write through the creating handle: %v", e)
	}
	if e, _ := c.call(fp.OpRead, 0, fp.ReadIn{Fh: wfh, Size: 3}); e != unix.EBADF {
		t.Errorf("read through a write-only handle: %v, want EBADF", e)
	}
	open := func(rel string, op fp.Opcode, flags uint32) uint64 {
		t.Helper()
		id, e := c.walkTo(rel)
		if e != 0 {
			t.Fatalf("lookup %s: %v", rel, e)
		}
		e, p := c.call(op, id, fp.OpenIn{Flags: flags})
		if e != 0 {
			t.Fatalf("open %s: %v", rel, e)
		}
		return le64(p)
	}
	size := func(rel string) uint64 {
		t.Helper()
		id, _ := c.walkTo(rel)
		e, p := c.call(fp.OpGetattr, id, fp.GetattrIn{})
		if e != 0 {
			t.Fatalf("getattr %s: %v", rel, e)
		}
		return le64(p[16+8:])
	}
	for _, h := range []struct {
		what, rel string
		op        fp.Opcode
		flags     uint32
	}{
		{"a tmpfs file opened read-only", "node_modules/f", fp.OpOpen, unix.O_RDONLY},
		{"a tmpfs directory", "node_modules", fp.OpOpendir, unix.O_RDONLY},
		{"a read-only tmpfs directory", "build/cache", fp.OpOpendir, unix.O_RDONLY},
		{"a read-only tmpfs directory opened as a file", "build/cache", fp.OpOpen, unix.O_RDONLY},
		{"a host file opened read-only", "src/main.go", fp.OpOpen, unix.O_RDONLY},
		{"a host directory", "src", fp.OpOpendir, unix.O_RDONLY},
	} {
		before := size(h.rel)
		fh := open(h.rel, h.op, h.flags)
		if e, _ := c.call(fp.OpWrite, 0, fp.WriteIn{Fh: fh, Offset: 1 << 20, Size: 3, Data: []byte("xyz")}); e != unix.EBADF {
			t.Errorf("write through %s: %v, want EBADF", h.what, e)
		}
		if after := size(h.rel); after != before {
			t.Errorf("%s: size %d after the write, %d before", h.what, after, before)
		}
		c.call(fp.OpRelease, 0, fp.ReleaseIn{Fh: fh})
	}
}

// A handle released while a request on it is still being answered is
// closed only once that request is done, as the 9P library closes a
// clunked fid: a READDIR racing a RELEASEDIR leaves no listing counted
// against Limits.ListingBytes.
func TestFUSEReleaseWaitsForRequestsOnTheHandle(t *testing.T) {
	_, work := tree(t)
	big := filepath.Join(work, "big")
	if err := os.Mkdir(big, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 4000 {
		if err := os.WriteFile(filepath.Join(big, fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := newFUSEClient(t, workspace(), work, Limits{})
	dir, e := c.walkTo("big")
	if e != 0 {
		t.Fatal(e)
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 8 && time.Now().Before(deadline); i++ {
		e, p := c.call(fp.OpOpendir, dir, fp.OpenIn{})
		if e != 0 {
			t.Fatal(e)
		}
		fh := le64(p)
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.call(fp.OpReaddir, dir, fp.ReadIn{Fh: fh, Size: 4096})
		}()
		time.Sleep(time.Duration(i%4) * time.Millisecond)
		c.call(fp.OpReleasedir, dir, fp.ReleaseIn{Fh: fh})
		<-done
		if n := c.f.fs.listing.Load(); n != 0 {
			t.Fatalf("round %d: %d bytes of listings counted with no handle open", i, n)
		}
	}
}
