//go:build linux

package vfs

import (
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"
)

// Limits on names, as Linux has them.
const (
	maxName = 255
	maxPath = 4095
)

// Open flags of 9P2000.L Tlopen and Tlcreate (Linux's values).
const (
	dotlExcl  = 0o200
	dotlTrunc = 0o1000
)

// fsys is one mount's file system: the host directory, its rules and
// its in-memory paths, with the counters that bound what a guest holds.
type fsys struct {
	root    int // O_PATH descriptor of the mount's host directory
	rootDev uint64
	rules   *Rules
	mem     *memStore
	uid     uint32
	gid     uint32
	lim     Limits
	mask    uint32       // permission bits no guest mode gives a host entry (modes.go)
	modes   *modeOverlay // the modes the guest set that the host does not have

	files   atomic.Int64 // live File values (fids, walk steps)
	open    atomic.Int64 // files holding a host descriptor
	listing atomic.Int64 // bytes of directory listings held

	// holding is every file holding a host descriptor, for Close.
	holdMu  sync.Mutex
	holding map[*file]struct{}
}

// hold records that f holds an open host file.
func (fs *fsys) hold(f *file) {
	fs.holdMu.Lock()
	defer fs.holdMu.Unlock()
	if fs.holding == nil {
		fs.holding = map[*file]struct{}{}
	}
	fs.holding[f] = struct{}{}
}

func (fs *fsys) unhold(f *file) {
	fs.holdMu.Lock()
	defer fs.holdMu.Unlock()
	delete(fs.holding, f)
}

// closeAll closes every open host file.
func (fs *fsys) closeAll() {
	fs.holdMu.Lock()
	var fs2 []*file
	for f := range fs.holding {
		fs2 = append(fs2, f)
	}
	fs.holdMu.Unlock()
	for _, f := range fs2 {
		f.Close()
	}
}

// node is what a path resolves to now.
type node struct {
	rel string
	pl  place
	mem *memNode    // when pl.inMem
	st  unix.Stat_t // otherwise
}

// mode is the node's type and permissions. An in-memory node's type
// never changes, so reading it needs no lock; its permissions are read
// under the store's lock where they matter.
func (n *node) mode() uint32 {
	if n.mem != nil {
		return n.mem.ftype
	}
	return n.st.Mode
}

func (n *node) isDir() bool { return n.mode()&unix.S_IFMT == unix.S_IFDIR }

// checkName refuses a name that is not one plain directory entry. The
// 9P server checks too; the file system does not rely on it.
func checkName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return unix.EINVAL
	case len(name) > maxName:
		return unix.ENAMETOOLONG
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '/' || name[i] == 0 {
			return unix.EINVAL
		}
	}
	return nil
}

// child checks name and joins it to dir.
func child(dir, name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	rel := joinRel(dir, name)
	if len(rel) > maxPath {
		return "", unix.ENAMETOOLONG
	}
	return rel, nil
}

// lookup resolves rel as it is now: hidden paths are ENOENT whatever
// the host holds, in-memory paths never reach the host, and the host is
// asked about the path itself, never through a link.
func (fs *fsys) lookup(rel string) (node, error) {
	n := node{rel: rel, pl: fs.rules.place(rel)}
	switch {
	case n.pl.hidden:
		return n, unix.ENOENT
	case n.pl.inMem:
		fs.mem.mu.Lock()
		defer fs.mem.mu.Unlock()
		m, err := fs.mem.lookup(n.pl.memRoot, rel)
		if err != nil {
			return n, err
		}
		n.mem = m
		return n, nil
	}
	st, err := fs.lstat(rel)
	if err != nil {
		return n, err
	}
	n.st = st
	return n, nil
}

// qid and attr lock the memory store for an in-memory node; callers
// must not hold it.
func (fs *fsys) qid(n *node) p9.QID {
	if n.mem != nil {
		fs.mem.mu.Lock()
		defer fs.mem.mu.Unlock()
		return p9.QID{Type: p9.FileMode(n.mem.mode).QIDType(), Path: memIDBit | n.mem.id}
	}
	mode := p9.FileMode(n.st.Mode)
	path := n.st.Ino
	if n.st.Dev != fs.rootDev {
		// Another file system mounted inside the tree: keep its inode
		// numbers apart from the root's.
		path ^= n.st.Dev << 40
	}
	return p9.QID{Type: mode.QIDType(), Path: path &^ memIDBit}
}

func (fs *fsys) attr(n *node) p9.Attr {
	a := p9.Attr{UID: p9.UID(fs.uid), GID: p9.GID(fs.gid), BlockSize: 4096}
	if m := n.mem; m != nil {
		fs.mem.mu.Lock()
		defer fs.mem.mu.Unlock()
		a.Mode = p9.FileMode(m.mode)
		a.NLink = p9.NLink(m.nlink)
		a.Size = uint64(len(m.data))
		if m.mode&unix.S_IFMT == unix.S_IFLNK {
			a.Size = uint64(len(m.target))
		}
		a.Blocks = (a.Size + 511) / 512
		a.ATimeSeconds, a.ATimeNanoSeconds = timeParts(m.atime)
		a.MTimeSeconds, a.MTimeNanoSeconds = timeParts(m.mtime)
		a.CTimeSeconds, a.CTimeNanoSeconds = timeParts(m.ctime)
		return a
	}
	st := &n.st
	a.Mode = p9.FileMode(fs.modes.mode(st))
	a.NLink = p9.NLink(st.Nlink)
	a.Size = uint64(st.Size)
	a.BlockSize = uint64(st.Blksize)
	a.Blocks = uint64(st.Blocks)
	a.ATimeSeconds, a.ATimeNanoSeconds = uint64(st.Atim.Sec), uint64(st.Atim.Nsec)
	a.MTimeSeconds, a.MTimeNanoSeconds = uint64(st.Mtim.Sec), uint64(st.Mtim.Nsec)
	a.CTimeSeconds, a.CTimeNanoSeconds = uint64(st.Ctim.Sec), uint64(st.Ctim.Nsec)
	return a
}

func timeParts(t time.Time) (uint64, uint64) {
	return uint64(t.Unix()), uint64(t.Nanosecond())
}

var attrAll = p9.AttrMask{Mode: true, NLink: true, UID: true, GID: true, RDev: true,
	ATime: true, MTime: true, CTime: true, INo: true, Size: true, Blocks: true}

// newFile makes a File for rel, counting it against Limits.Files.
func (fs *fsys) newFile(rel string) (*file, error) {
	if fs.files.Add(1) > int64(fs.lim.Files) {
		fs.files.Add(-1)
		return nil, unix.ENFILE
	}
	return &file{fs: fs, rel: rel}, nil
}

// file is a 9P fid's file: a path relative to the mount's root, resolved
// again by every operation (so a rule is always checked against the path
// as it is), and, once opened, what it opened.
type file struct {
	p9.DefaultWalkGetAttr
	fs *fsys

	mu      sync.Mutex
	rel     string
	closed  bool
	opened  bool
	mode    p9.OpenFlags // the access mode it was opened with
	host    *os.File     // an opened host file
	mem     *memNode     // an opened in-memory file or directory
	dirents p9.Dirents   // a directory's listing, taken at offset 0
}

var _ p9.File = (*file)(nil)

func (f *file) path() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rel
}

// doWalk is Walk of p9.File.
func (f *file) doWalk(names []string) ([]p9.QID, p9.File, error) {
	qids, nf, _, err := f.walk(names)
	if err != nil {
		return nil, nil, err
	}
	return qids, nf, nil
}

// doWalkGetAttr is WalkGetAttr of p9.File.
func (f *file) doWalkGetAttr(names []string) ([]p9.QID, p9.File, p9.AttrMask, p9.Attr, error) {
	qids, nf, n, err := f.walk(names)
	if err != nil {
		return nil, nil, p9.AttrMask{}, p9.Attr{}, err
	}
	return qids, nf, attrAll, f.fs.attr(&n), nil
}

func (f *file) walk(names []string) ([]p9.QID, p9.File, node, error) {
	rel, n, qids, err := f.resolve(names)
	if err != nil {
		return nil, nil, n, err
	}
	nf, err := f.fs.newFile(rel)
	if err != nil {
		return nil, nil, n, err
	}
	return qids, nf, n, nil
}

// resolve walks the names from f's path, each step a directory entry
// checked against the rules, and returns the path reached and its node.
func (f *file) resolve(names []string) (string, node, []p9.QID, error) {
	rel := f.path()
	n, err := f.fs.lookup(rel)
	if err != nil {
		return "", n, nil, err
	}
	var qids []p9.QID
	for _, name := range names {
		if !n.isDir() {
			return "", n, nil, unix.ENOTDIR
		}
		if rel, err = child(rel, name); err != nil {
			return "", n, nil, err
		}
		if n, err = f.fs.lookup(rel); err != nil {
			return "", n, nil, err
		}
		qids = append(qids, f.fs.qid(&n))
	}
	return rel, n, qids, nil
}

// doStatFS is StatFS of p9.File.
func (f *file) doStatFS() (p9.FSStat, error) {
	var s unix.Statfs_t
	if err := unix.Fstatfs(f.fs.root, &s); err != nil {
		return p9.FSStat{}, err
	}
	return p9.FSStat{
		Type:            0x01021997, // V9FS_MAGIC
		BlockSize:       uint32(s.Bsize),
		Blocks:          s.Blocks,
		BlocksFree:      s.Bfree,
		BlocksAvailable: s.Bavail,
		Files:           s.Files,
		FilesFree:       s.Ffree,
		NameLength:      maxName,
	}, nil
}

// doGetAttr is GetAttr of p9.File.
func (f *file) doGetAttr(p9.AttrMask) (p9.QID, p9.AttrMask, p9.Attr, error) {
	f.mu.Lock()
	h, m := f.host, f.mem
	f.mu.Unlock()
	var n node
	switch {
	case h != nil:
		// An open file is what was opened, even if its name is gone.
		if err := unix.Fstat(int(h.Fd()), &n.st); err != nil {
			return p9.QID{}, p9.AttrMask{}, p9.Attr{}, err
		}
	case m != nil:
		n.mem = m
	default:
		var err error
		if n, err = f.fs.lookup(f.path()); err != nil {
			return p9.QID{}, p9.AttrMask{}, p9.Attr{}, err
		}
	}
	return f.fs.qid(&n), attrAll, f.fs.attr(&n), nil
}

// doSetAttr is SetAttr of p9.File. Ownership changes are accepted and
// ignored: every file appears owned by the mount's owner, and the host
// user cannot give files away. A mode reaches the host masked, and the
// root's not at all; the guest sees what it set (modes.go).
func (f *file) doSetAttr(valid p9.SetAttrMask, attr p9.SetAttr) error {
	n, err := f.fs.lookup(f.path())
	if err != nil {
		return err
	}
	if !valid.Permissions && !valid.Size && !valid.ATime && !valid.MTime && !valid.CTime {
		return nil
	}
	if !n.pl.writable {
		return unix.EROFS
	}
	if n.mem != nil {
		return f.fs.memSetAttr(n, valid, attr)
	}
	fd, st, err := f.fs.pathFD(n.rel)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if valid.Size {
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return unix.EINVAL
		}
		w, err := reopen(fd, unix.O_WRONLY|unix.O_NONBLOCK)
		if err != nil {
			return err
		}
		err = w.Truncate(int64(attr.Size))
		w.Close()
		if err != nil {
			return err
		}
	}
	if valid.Permissions {
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return unix.EOPNOTSUPP
		}
		if n.rel != "" {
			if err := unix.Chmod(procPath(fd), f.fs.hostBits(attr.Permissions, st.Mode, st.Mode)); err != nil {
				return err
			}
			if err := unix.Fstat(fd, &st); err != nil {
				return err
			}
		}
		f.fs.modes.set(&st, guestBits(attr.Permissions))
	}
	if valid.ATime || valid.MTime {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if valid.ATime {
			ts[0] = setTime(valid.ATimeNotSystemTime, attr.ATimeSeconds, attr.ATimeNanoSeconds)
		}
		if valid.MTime {
			ts[1] = setTime(valid.MTimeNotSystemTime, attr.MTimeSeconds, attr.MTimeNanoSeconds)
		}
		dirfd, name, done, err := f.fs.parentOf(n.rel)
		if err != nil {
			return err
		}
		defer done()
		if err := unix.UtimesNanoAt(dirfd, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return nil
}

func setTime(given bool, sec, nsec uint64) unix.Timespec {
	if !given {
		return unix.Timespec{Nsec: unix.UTIME_NOW}
	}
	return unix.Timespec{Sec: int64(sec), Nsec: int64(nsec)}
}

// Close implements p9.File.
func (f *file) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	f.fs.files.Add(-1)
	if f.host != nil {
		f.host.Close()
		f.host = nil
		f.fs.open.Add(-1)
		f.fs.unhold(f)
	}
	if m := f.mem; m != nil && f.opened {
		f.fs.mem.mu.Lock()
		f.fs.mem.closed(m)
		f.fs.mem.mu.Unlock()
	}
	f.mem = nil
	f.fs.unchargeListing(f.dirents)
	f.dirents = nil
	return nil
}

// doOpen is Open of p9.File. Only regular files and directories open: a
// device node or FIFO in the tree would act on the host.
func (f *file) doOpen(mode p9.OpenFlags) (p9.QID, uint32, error) {
	n, err := f.fs.lookup(f.path())
	if err != nil {
		return p9.QID{}, 0, err
	}
	write := mode.Mode() != p9.ReadOnly || mode&dotlTrunc != 0
	ft := n.mode() & unix.S_IFMT
	if ft == unix.S_IFDIR && write {
		// Before the rules, as the 9P library and the kernel check.
		return p9.QID{}, 0, unix.EISDIR
	}
	if write && !n.pl.writable {
		return p9.QID{}, 0, unix.EROFS
	}
	if ft != unix.S_IFREG && ft != unix.S_IFDIR {
		return p9.QID{}, 0, unix.EPERM
	}
	if n.mem != nil {
		f.fs.mem.mu.Lock()
		if mode&dotlTrunc != 0 && ft == unix.S_IFREG {
			f.fs.mem.used -= int64(len(n.mem.data))
			n.mem.data = nil
			n.mem.mtime = time.Now()
		}
		f.fs.mem.opened(n.mem)
		f.fs.mem.mu.Unlock()
		qid := f.fs.qid(&n)
		f.mu.Lock()
		f.mem, f.opened, f.mode = n.mem, true, mode.Mode()
		f.mu.Unlock()
		return qid, 0, nil
	}
	if ft == unix.S_IFDIR {
		// Directories are listed afresh at offset 0; nothing is held.
		f.mu.Lock()
		f.opened, f.mode = true, p9.ReadOnly
		f.mu.Unlock()
		return f.fs.qid(&n), 0, nil
	}
	fd, st, err := f.fs.pathFD(n.rel)
	if err != nil {
		return p9.QID{}, 0, err
	}
	defer unix.Close(fd)
	if st.Ino != n.st.Ino || st.Mode&unix.S_IFMT != unix.S_IFREG {
		// Replaced on the host between the two looks.
		return p9.QID{}, 0, unix.EAGAIN
	}
	flags := mode.OSFlags() | unix.O_NONBLOCK
	if mode&dotlTrunc != 0 {
		flags |= unix.O_TRUNC
	}
	h, err := f.fs.openHost(fd, flags)
	if err != nil {
		return p9.QID{}, 0, err
	}
	f.mu.Lock()
	f.host, f.opened, f.mode = h, true, mode.Mode()
	f.mu.Unlock()
	f.fs.hold(f)
	return f.fs.qid(&n), 0, nil
}

// openHost reopens an O_PATH descriptor, counting it against
// Limits.OpenFiles.
func (fs *fsys) openHost(fd int, flags int) (*os.File, error) {
	if fs.open.Add(1) > int64(fs.lim.OpenFiles) {
		fs.open.Add(-1)
		return nil, unix.EMFILE
	}
	h, err := reopen(fd, flags)
	if err != nil {
		fs.open.Add(-1)
		return nil, err
	}
	return h, nil
}

// doReadAt is ReadAt of p9.File.
func (f *file) doReadAt(p []byte, offset int64) (int, error) {
	f.mu.Lock()
	h, m, mode := f.host, f.mem, f.mode.Mode()
	f.mu.Unlock()
	if offset < 0 {
		return 0, unix.EINVAL
	}
	if mode == p9.WriteOnly {
		// As a descriptor opened so refuses (the 9P library refuses
		// before): an in-memory file has no descriptor to.
		return 0, unix.EBADF
	}
	switch {
	case h != nil:
		n, err := h.ReadAt(p, offset)
		if err == io.EOF {
			err = nil
		}
		return n, err
	case m != nil:
		f.fs.mem.mu.Lock()
		defer f.fs.mem.mu.Unlock()
		if m.isDir() {
			return 0, unix.EISDIR
		}
		if offset >= int64(len(m.data)) {
			return 0, nil
		}
		m.atime = time.Now()
		return copy(p, m.data[offset:]), nil
	}
	return 0, unix.EBADF
}

// doWriteAt is WriteAt of p9.File.
func (f *file) doWriteAt(p []byte, offset int64) (int, error) {
	f.mu.Lock()
	h, m, mode := f.host, f.mem, f.mode.Mode()
	f.mu.Unlock()
	if offset < 0 || offset > 1<<50 {
		return 0, unix.EINVAL
	}
	if mode == p9.ReadOnly {
		// A file opened read-only, and every directory (opened only
		// so), takes no write; see doReadAt.
		return 0, unix.EBADF
	}
	switch {
	case h != nil:
		return h.WriteAt(p, offset)
	case m != nil:
		f.fs.mem.mu.Lock()
		defer f.fs.mem.mu.Unlock()
		if m.gone() {
			// Closed meanwhile, and no name holds it.
			return 0, unix.EBADF
		}
		end := offset + int64(len(p))
		if grow := end - int64(len(m.data)); grow > 0 {
			if err := f.fs.mem.charge(grow); err != nil {
				return 0, err
			}
			m.data = append(m.data, make([]byte, grow)...)
		}
		copy(m.data[offset:], p)
		m.mtime, m.ctime = time.Now(), time.Now()
		return len(p), nil
	}
	return 0, unix.EBADF
}

// doFSync is FSync of p9.File.
func (f *file) doFSync() error {
	f.mu.Lock()
	h := f.host
	f.mu.Unlock()
	if h != nil {
		return h.Sync()
	}
	return nil
}

// Extended attributes are not served: the framing layer answers the
// guest's xattr requests itself (see conn.go), and these are never
// reached.
func (f *file) SetXattr(string, []byte, p9.XattrFlags) error { return linux.EOPNOTSUPP }
func (f *file) GetXattr(string) ([]byte, error)              { return nil, linux.ENODATA }
func (f *file) ListXattrs() ([]string, error)                { return nil, linux.EOPNOTSUPP }
func (f *file) RemoveXattr(string) error                     { return linux.EOPNOTSUPP }

// Lock implements p9.File. Locks are advisory and local to the guest's
// kernel, as with QEMU's 9p server; git and npm use lock files instead.
func (f *file) Lock(int, p9.LockType, p9.LockFlags, uint64, uint64, string) (p9.LockStatus, error) {
	return p9.LockStatusOK, nil
}

// create checks that the name may be made in this directory and returns
// the new path and its place.
func (f *file) create(name string) (string, place, error) {
	dir := f.path()
	rel, err := child(dir, name)
	if err != nil {
		return "", place{}, err
	}
	pl := f.fs.rules.place(rel)
	switch {
	case pl.hidden:
		// Neither "exists" nor "no such file": a hidden name cannot be
		// made, whatever the host has there.
		return "", pl, unix.EACCES
	case !pl.writable:
		return "", pl, unix.EROFS
	}
	return rel, pl, nil
}

// doCreate is Create of p9.File.
func (f *file) doCreate(name string, flags p9.OpenFlags, perm p9.FileMode, _ p9.UID, _ p9.GID) (p9.File, p9.QID, uint32, error) {
	rel, pl, err := f.create(name)
	if err != nil {
		return nil, p9.QID{}, 0, err
	}
	nf, err := f.fs.newFile(rel)
	if err != nil {
		return nil, p9.QID{}, 0, err
	}
	fail := func(err error) (p9.File, p9.QID, uint32, error) {
		nf.Close()
		return nil, p9.QID{}, 0, err
	}
	if pl.inMem {
		m, err := f.fs.memMake(rel, pl, unix.S_IFREG|guestBits(perm), "")
		if err != nil {
			return fail(err)
		}
		f.fs.mem.mu.Lock()
		f.fs.mem.opened(m)
		f.fs.mem.mu.Unlock()
		nf.mem, nf.opened, nf.mode = m, true, flags.Mode()
		return nf, p9.QID{Type: p9.TypeRegular, Path: memIDBit | m.id}, 0, nil
	}
	dirfd, base, done, err := f.fs.parentOf(rel)
	if err != nil {
		return fail(err)
	}
	defer done()
	if f.fs.open.Add(1) > int64(f.fs.lim.OpenFiles) {
		f.fs.open.Add(-1)
		return fail(unix.EMFILE)
	}
	oflags := flags.OSFlags() | unix.O_CREAT | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	if flags&dotlExcl != 0 {
		oflags |= unix.O_EXCL
	}
	if flags&dotlTrunc != 0 {
		oflags |= unix.O_TRUNC
	}
	// Made exclusively first, so that the guest's mode is remembered
	// only for a file this call made (an existing file keeps its mode).
	hostMode := f.fs.hostBits(perm, unix.S_IFREG, 0)
	fd, err := unix.Openat(dirfd, base, oflags|unix.O_EXCL, hostMode)
	made := err == nil
	if err == unix.EEXIST && flags&dotlExcl == 0 {
		fd, err = unix.Openat(dirfd, base, oflags, hostMode)
	}
	if err != nil {
		f.fs.open.Add(-1)
		return fail(err)
	}
	h := os.NewFile(uintptr(fd), base)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		h.Close()
		f.fs.open.Add(-1)
		return fail(unix.EPERM)
	}
	if made {
		f.fs.modes.set(&st, guestBits(perm))
	}
	nf.host, nf.opened, nf.mode = h, true, flags.Mode()
	f.fs.hold(nf)
	n := node{rel: rel, pl: pl, st: st}
	return nf, f.fs.qid(&n), 0, nil
}

// doMkdir is Mkdir of p9.File.
func (f *file) doMkdir(name string, perm p9.FileMode, _ p9.UID, _ p9.GID) (p9.QID, error) {
	rel, pl, err := f.create(name)
	if err != nil {
		return p9.QID{}, err
	}
	if pl.inMem {
		m, err := f.fs.memMake(rel, pl, unix.S_IFDIR|guestBits(perm), "")
		if err != nil {
			return p9.QID{}, err
		}
		return p9.QID{Type: p9.TypeDir, Path: memIDBit | m.id}, nil
	}
	dirfd, base, done, err := f.fs.parentOf(rel)
	if err != nil {
		return p9.QID{}, err
	}
	defer done()
	if err := unix.Mkdirat(dirfd, base, f.fs.hostBits(perm, unix.S_IFDIR, 0)); err != nil {
		return p9.QID{}, err
	}
	n, err := f.fs.lookup(rel)
	if err != nil {
		return p9.QID{}, err
	}
	// A set-group-ID bit inherited from the host's parent shows, as it
	// would on a disk.
	f.fs.modes.set(&n.st, guestBits(perm)|n.st.Mode&unix.S_ISGID)
	return f.fs.qid(&n), nil
}

// doSymlink is Symlink of p9.File. The target is only stored: the host never
// follows a link, and the guest's kernel resolves it through this server
// like any other path. Git on the host would, so none is made in a git
// directory (place.noLinks).
func (f *file) doSymlink(target, name string, _ p9.UID, _ p9.GID) (p9.QID, error) {
	if target == "" || len(target) > maxPath {
		return p9.QID{}, unix.ENAMETOOLONG
	}
	for i := 0; i < len(target); i++ {
		if target[i] == 0 {
			return p9.QID{}, unix.EINVAL
		}
	}
	rel, pl, err := f.create(name)
	if err != nil {
		return p9.QID{}, err
	}
	if pl.noLinks {
		return p9.QID{}, unix.EPERM
	}
	if pl.inMem {
		m, err := f.fs.memMake(rel, pl, unix.S_IFLNK|0o777, target)
		if err != nil {
			return p9.QID{}, err
		}
		return p9.QID{Type: p9.TypeSymlink, Path: memIDBit | m.id}, nil
	}
	dirfd, base, done, err := f.fs.parentOf(rel)
	if err != nil {
		return p9.QID{}, err
	}
	defer done()
	if err := unix.Symlinkat(target, dirfd, base); err != nil {
		return p9.QID{}, err
	}
	n, err := f.fs.lookup(rel)
	if err != nil {
		return p9.QID{}, err
	}
	return f.fs.qid(&n), nil
}

// doLink is Link of p9.File. The target must be a visible, writable,
// non-directory file on the same side (host or memory): a second name
// for a read-only file in a writable place would make it writable.
func (f *file) doLink(target p9.File, name string) error {
	t, ok := target.(*file)
	if !ok || t.fs != f.fs {
		return unix.EXDEV
	}
	rel, pl, err := f.create(name)
	if err != nil {
		return err
	}
	tn, err := f.fs.lookup(t.path())
	if err != nil {
		return err
	}
	if !tn.pl.writable {
		return unix.EROFS
	}
	if tn.isDir() || pl.noLinks && tn.mode()&unix.S_IFMT == unix.S_IFLNK {
		// A link's second name is a link: none in a git directory.
		return unix.EPERM
	}
	if tn.pl.inMem != pl.inMem {
		return unix.EXDEV
	}
	if pl.inMem {
		return f.fs.memLink(tn, rel, pl)
	}
	tdir, tbase, tdone, err := f.fs.parentOf(tn.rel)
	if err != nil {
		return err
	}
	defer tdone()
	dirfd, base, done, err := f.fs.parentOf(rel)
	if err != nil {
		return err
	}
	defer done()
	// Flags 0: a link target that is itself a symlink is linked, not
	// followed.
	return unix.Linkat(tdir, tbase, dirfd, base, 0)
}

// Mknod implements p9.File: device nodes, FIFOs and sockets are not
// made in a shared tree.
func (f *file) Mknod(string, p9.FileMode, uint32, uint32, p9.UID, p9.GID) (p9.QID, error) {
	return p9.QID{}, linux.EPERM
}

// Rename implements p9.File; the server uses RenameAt.
func (f *file) Rename(p9.File, string) error { return linux.ENOSYS }

// doRenameAt is RenameAt of p9.File. Both names must be writable, and every
// path under a renamed directory must keep its place: a rename that
// would move a hidden file into view, a file into a hidden or read-only
// path, or host files into memory is refused (EXDEV for the last, which
// tools answer by copying file by file through the checks).
func (f *file) doRenameAt(oldName string, newDir p9.File, newName string) error {
	nd, ok := newDir.(*file)
	if !ok || nd.fs != f.fs {
		return unix.EXDEV
	}
	from, err := child(f.path(), oldName)
	if err != nil {
		return err
	}
	to, err := child(nd.path(), newName)
	if err != nil {
		return err
	}
	src, err := f.fs.lookup(from)
	if err != nil {
		return err
	}
	dst := f.fs.rules.place(to)
	switch {
	case dst.hidden:
		return unix.EACCES
	case !src.pl.writable || !dst.writable:
		return unix.EROFS
	case src.pl.inMem != dst.inMem:
		return unix.EXDEV
	case dst.noLinks && src.mode()&unix.S_IFMT == unix.S_IFLNK:
		return unix.EPERM
	}
	if src.isDir() && f.fs.rules.renameNeedsScan(from, to) {
		if err := f.fs.samePlaces(src, to); err != nil {
			return err
		}
	}
	if src.pl.inMem {
		return f.fs.memRename(src, to, dst)
	}
	odir, obase, odone, err := f.fs.parentOf(from)
	if err != nil {
		return err
	}
	defer odone()
	ndir, nbase, ndone, err := f.fs.parentOf(to)
	if err != nil {
		return err
	}
	defer ndone()
	replaced, rerr := f.fs.lstat(to)
	if err := unix.Renameat(odir, obase, ndir, nbase); err != nil {
		return err
	}
	if rerr == nil && (replaced.Dev != src.st.Dev || replaced.Ino != src.st.Ino) {
		f.fs.modes.gone(&replaced)
	}
	if src.isDir() {
		f.fs.moveMemRoots(from, to)
	}
	return nil
}

// doUnlinkAt is UnlinkAt of p9.File.
func (f *file) doUnlinkAt(name string, flags uint32) error {
	rel, err := child(f.path(), name)
	if err != nil {
		return err
	}
	n, err := f.fs.lookup(rel)
	if err != nil {
		return err
	}
	if !n.pl.writable {
		return unix.EROFS
	}
	rmdir := flags&unix.AT_REMOVEDIR != 0
	if n.mem != nil {
		f.fs.mem.mu.Lock()
		defer f.fs.mem.mu.Unlock()
		m, err := f.fs.mem.remove(n.pl.memRoot, rel, rmdir, !rmdir)
		if err != nil {
			return err
		}
		_, base := splitRel(rel)
		f.fs.mem.release(m, base)
		return nil
	}
	dirfd, base, done, err := f.fs.parentOf(rel)
	if err != nil {
		return err
	}
	defer done()
	uflags := 0
	if rmdir {
		uflags = unix.AT_REMOVEDIR
	}
	if err := unix.Unlinkat(dirfd, base, uflags); err != nil {
		return err
	}
	f.fs.modes.gone(&n.st)
	return nil
}

// doReadlink is Readlink of p9.File.
func (f *file) doReadlink() (string, error) {
	n, err := f.fs.lookup(f.path())
	if err != nil {
		return "", err
	}
	if n.mode()&unix.S_IFMT != unix.S_IFLNK {
		return "", unix.EINVAL
	}
	if n.mem != nil {
		f.fs.mem.mu.Lock()
		defer f.fs.mem.mu.Unlock()
		return n.mem.target, nil
	}
	dirfd, base, done, err := f.fs.parentOf(n.rel)
	if err != nil {
		return "", err
	}
	defer done()
	buf := make([]byte, maxPath+1)
	k, err := unix.Readlinkat(dirfd, base, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:k]), nil
}

// Renamed implements p9.File.
func (f *file) Renamed(newDir p9.File, newName string) {
	nd, ok := newDir.(*file)
	if !ok {
		return
	}
	f.setPath(joinRel(nd.path(), newName))
}

// setPath names the file's new path after a rename.
func (f *file) setPath(rel string) {
	f.mu.Lock()
	f.rel = rel
	f.mu.Unlock()
}
