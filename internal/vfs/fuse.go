//go:build linux

package vfs

import (
	"errors"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"

	fp "github.com/sbx-dev/sbx/internal/proto/fuseproto"
)

// FUSE serves the server's file system to a FUSE client: a guest
// kernel's virtiofs driver, or the host kernel through /dev/fuse
// (ServeDev). Every operation is one of the file system's own (the
// methods the 9P path calls), so every rule, bound and errno is the
// 9P path's:
//
//   - A node ID names a path of the mount, as a 9P fid does, with the
//     kernel's lookup count; FORGET and BATCH_FORGET drop it, and IDs
//     are never reused. Nodes count against Limits.Files (ENFILE
//     beyond), as fids do. A lookup of a path whose host file was
//     replaced (another inode or type) gets a new ID. A renamed node
//     keeps its ID and takes its new path; an unlinked or replaced one
//     keeps its ID until forgotten but is no longer found by lookup.
//     The root is fuseproto.RootID.
//   - A file handle (OPEN, OPENDIR, CREATE) is an opened file as a 9P
//     fid opens it; at most Limits.OpenFiles handles exist (EMFILE
//     beyond), and host descriptors count as they do for 9P. A handle
//     reads and writes only as it was opened, in memory as on the host:
//     EBADF otherwise, as a descriptor answers (the 9P library answers
//     EPERM before the file system is asked).
//   - INIT negotiates protocol 7.31 to 7.36 and these flags, no others:
//     ASYNC_READ (reads in parallel), ATOMIC_O_TRUNC (an open's O_TRUNC
//     is the open's, as 9P's Tlopen), BIG_WRITES and MAX_PAGES (writes
//     and reads up to max_write, which is Limits.Msize rounded down to
//     pages), AUTO_INVAL_DATA (the kernel drops cached pages when a
//     file's mtime or size changes: host edits are seen),
//     DO_READDIRPLUS and READDIRPLUS_AUTO (listings carry entries, which
//     git status benefits from) and PARALLEL_DIROPS. Not: the writeback
//     cache (the host would see writes late, and the kernel would read
//     write-only files), POSIX or BSD locks (locks stay in the guest's
//     kernel, as over 9P), DONT_MASK (the kernel applies the umask),
//     HANDLE_KILLPRIV, POSIX ACLs, symlink caching (host edits), DAX and
//     mappings (no shared window), submounts, export support.
//   - Replies carry FUSEOptions' timeouts: the kernel caches a name or
//     attributes at most that long, so a host edit is seen within
//     EntryTimeout (names) and AttrTimeout (sizes, modes, times).
//     Failed lookups are not cached.
//   - Errnos are the 9P path's. ACCESS, LSEEK, FALLOCATE and what is not
//     listed are ENOSYS (the kernel then stops asking or does the work
//     itself); GETXATTR is ENODATA and LISTXATTR, SETXATTR and
//     REMOVEXATTR EOPNOTSUPP, as conn.go answers them; MKNOD makes
//     regular files only (EPERM for devices, FIFOs and sockets);
//     RENAME2 with any flag is EINVAL, what the 9P client answers for
//     renameat2 flags.
//
// A FUSE is safe for concurrent use. Operations hold a lock shared
// among them and exclusive for renames, as the 9P library's rename lock
// is, so that no path is resolved while a rename moves the nodes' and
// handles' paths.
type FUSE struct {
	fs       *fsys
	opts     FUSEOptions
	maxWrite uint32

	renameMu sync.RWMutex

	mu       sync.Mutex
	inited   bool
	nodes    map[uint64]*fnode
	byPath   map[string]uint64
	nextNode uint64
	handles  map[uint64]*fhandle
	nextFh   uint64
}

// DefaultFUSETimeout is how long a FUSE client caches names and
// attributes when FUSEOptions leave them zero: the bound on how late a
// host edit is seen in the guest.
const DefaultFUSETimeout = time.Second

// wirePermissions is the permission bits of a mode a FUSE request asks
// for as 9P2000.L carries them (the p9 library's mask): set-user-ID and
// set-group-ID never arrive, so the guest sees them on neither
// transport.
func wirePermissions(mode uint32) p9.FileMode { return p9.FileMode(mode & 0o1777) }

// FUSEOptions configure a FUSE session.
type FUSEOptions struct {
	// EntryTimeout is how long the client may cache a name, and
	// AttrTimeout its attributes: the bound on how late a host edit is
	// seen. Zero takes DefaultFUSETimeout; a negative value caches
	// nothing.
	EntryTimeout, AttrTimeout time.Duration
}

// fhandle is an open file handle: its file, and how many requests use
// it now. A handle released (or dropped by DESTROY) while requests still
// use it leaves the table at once and its file is closed when the last
// of them is done, as the 9P library closes a clunked fid.
type fhandle struct {
	f    *file
	refs int  // requests using it; under FUSE.mu
	gone bool // released; under FUSE.mu
}

// fnode is a node the kernel holds.
type fnode struct {
	f       *file  // its path, never opened
	ino     uint64 // the qid path it had when looked up
	ftype   uint32
	nlookup uint64
}

// FUSE returns a handler of FUSE requests for the server's file system.
// A server may have one 9P connection and FUSE sessions at once; their
// tmpfs paths and modes are the same.
func (s *Server) FUSE(opts FUSEOptions) *FUSE {
	if opts.EntryTimeout == 0 {
		opts.EntryTimeout = DefaultFUSETimeout
	}
	if opts.AttrTimeout == 0 {
		opts.AttrTimeout = DefaultFUSETimeout
	}
	mw := s.lim.Msize &^ 4095
	return &FUSE{fs: s.fs, opts: opts, maxWrite: mw}
}

// MaxRequest is the largest request Handle takes: a WRITE of max_write
// with its headers, with room to spare. A /dev/fuse reader needs a
// buffer this large.
func (f *FUSE) MaxRequest() int { return int(f.maxWrite) + 4096 }

// ourFlags are the INIT flags offered (FUSE's doc says why).
const ourFlags = fp.InitAsyncRead | fp.InitAtomicOTrunc | fp.InitBigWrites | fp.InitMaxPages |
	fp.InitAutoInvalData | fp.InitDoReaddirplus | fp.InitReaddirplusAut | fp.InitParallelDirops

// Handle answers one request: in holds it (header and arguments,
// possibly split across several buffers), out receives the reply. It
// returns the bytes written to out: 0 for requests without a reply
// (FORGET, BATCH_FORGET, INTERRUPT) and for input too short to hold a
// header. A reply larger than out is replaced by an ERANGE reply.
func (f *FUSE) Handle(in [][]byte, out [][]byte) int {
	req, ok := f.gather(in)
	if !ok {
		return f.put(out, errReply(in, unix.EINVAL))
	}
	reply := f.handle(req)
	if reply == nil {
		return 0
	}
	if n := f.put(out, reply); n > 0 {
		return n
	}
	small := make([]byte, fp.OutHeaderSize)
	copy(small, reply)
	fp.PutOutHeader(small, fp.OutHeaderSize, unix.ERANGE, uniqueOf(reply))
	return f.put(out, small)
}

// gather joins a request's buffers, refusing more than MaxRequest.
func (f *FUSE) gather(in [][]byte) ([]byte, bool) {
	total := 0
	for _, b := range in {
		total += len(b)
		if total > f.MaxRequest() {
			return nil, false
		}
	}
	if len(in) == 1 {
		return in[0], true
	}
	req := make([]byte, 0, total)
	for _, b := range in {
		req = append(req, b...)
	}
	return req, true
}

// errReply answers a request too large to take, if its unique ID can be
// read.
func errReply(in [][]byte, errno syscall.Errno) []byte {
	var h []byte
	for _, b := range in {
		h = append(h, b[:min(len(b), fp.InHeaderSize-len(h))]...)
		if len(h) == fp.InHeaderSize {
			break
		}
	}
	if len(h) < 16 {
		return nil
	}
	r := make([]byte, fp.OutHeaderSize)
	fp.PutOutHeader(r, fp.OutHeaderSize, errno, le64(h[8:]))
	return r
}

func le64(b []byte) uint64 {
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func uniqueOf(reply []byte) uint64 { return le64(reply[8:16]) }

// put copies reply into out, or writes nothing (0) when it does not fit.
func (f *FUSE) put(out [][]byte, reply []byte) int {
	if reply == nil {
		return 0
	}
	room := 0
	for _, b := range out {
		room += len(b)
	}
	if room < len(reply) {
		return 0
	}
	n := 0
	for _, b := range out {
		n += copy(b, reply[n:])
		if n == len(reply) {
			break
		}
	}
	return n
}

// reply builds replies: a header, then the payload appended.
type reply struct {
	unique uint64
	b      []byte
}

func newReply(unique uint64, size int) *reply {
	return &reply{unique: unique, b: make([]byte, fp.OutHeaderSize, fp.OutHeaderSize+size)}
}

func (r *reply) done() []byte {
	fp.PutOutHeader(r.b, uint32(len(r.b)), 0, r.unique)
	return r.b
}

func errorReply(unique uint64, errno syscall.Errno) []byte {
	b := make([]byte, fp.OutHeaderSize)
	fp.PutOutHeader(b, fp.OutHeaderSize, errno, unique)
	return b
}

// errnoOf is the errno the file system's error carries, EIO for one
// without.
func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	var l linux.Errno
	if errors.As(err, &l) {
		return syscall.Errno(l)
	}
	var d *fp.Error
	if errors.As(err, &d) {
		return d.Errno
	}
	return unix.EIO
}

// handle answers one whole request; nil is no reply.
func (f *FUSE) handle(req []byte) []byte {
	h, body, err := fp.DecodeHeader(req)
	if err != nil {
		if len(req) < fp.InHeaderSize {
			return nil
		}
		return errorReply(h.Unique, errnoOf(err))
	}
	args, err := fp.DecodeArgs(h, body, f.maxWrite)
	if err != nil {
		if h.Opcode == fp.OpForget || h.Opcode == fp.OpBatchForget || h.Opcode == fp.OpInterrupt {
			return nil
		}
		return errorReply(h.Unique, errnoOf(err))
	}
	switch h.Opcode {
	case fp.OpInit:
		return f.init(h, args.(fp.InitIn))
	case fp.OpForget:
		f.forget(h.NodeID, args.(fp.ForgetIn).Nlookup)
		return nil
	case fp.OpBatchForget:
		for _, one := range args.(fp.BatchForgetIn).Forgets {
			f.forget(one.NodeID, one.Nlookup)
		}
		return nil
	case fp.OpInterrupt:
		return nil
	}
	f.mu.Lock()
	inited := f.inited
	f.mu.Unlock()
	if !inited {
		return errorReply(h.Unique, unix.EIO)
	}
	if h.Opcode == fp.OpRename || h.Opcode == fp.OpRename2 {
		f.renameMu.Lock()
		defer f.renameMu.Unlock()
	} else {
		f.renameMu.RLock()
		defer f.renameMu.RUnlock()
	}
	r, err := f.op(h, args)
	if err != nil {
		return errorReply(h.Unique, errnoOf(err))
	}
	return r
}

// init answers INIT.
func (f *FUSE) init(h fp.InHeader, in fp.InitIn) []byte {
	if in.Major != fp.Major || in.Minor < fp.MinMinor {
		return errorReply(h.Unique, unix.EPROTO)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inited {
		return errorReply(h.Unique, unix.EPROTO)
	}
	if err := f.reset(); err != nil {
		return errorReply(h.Unique, errnoOf(err))
	}
	f.inited = true
	bg := min(f.fs.lim.Requests, 0xffff)
	out := fp.InitOut{
		Major: fp.Major, Minor: min(in.Minor, fp.Minor),
		MaxReadahead:  min(in.MaxReadahead, f.maxWrite),
		Flags:         in.Flags & ourFlags,
		MaxBackground: uint16(bg), CongestionThreshold: uint16(bg * 3 / 4),
		MaxWrite: f.maxWrite, TimeGran: 1, MaxPages: uint16(f.maxWrite / 4096),
	}
	r := newReply(h.Unique, fp.InitOutSize)
	r.b = out.Append(r.b)
	return r.done()
}

// reset drops every node and handle and makes the root; f.mu is held.
func (f *FUSE) reset() error {
	f.dropAll()
	root, err := f.fs.newFile("")
	if err != nil {
		return err
	}
	f.nodes = map[uint64]*fnode{fp.RootID: {f: root, nlookup: 1, ftype: unix.S_IFDIR}}
	f.byPath = map[string]uint64{"": fp.RootID}
	f.handles = map[uint64]*fhandle{}
	f.nextNode = fp.RootID + 1
	return nil
}

func (f *FUSE) dropAll() {
	for _, n := range f.nodes {
		n.f.Close()
	}
	for _, h := range f.handles {
		h.gone = true
		if h.refs == 0 {
			h.f.Close()
		}
	}
	f.nodes, f.byPath, f.handles = nil, nil, nil
}

// Close drops every node and handle; later requests are refused until
// the next INIT.
func (f *FUSE) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropAll()
	f.inited = false
}

func (f *FUSE) forget(id, n uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	nd := f.nodes[id]
	if nd == nil || id == fp.RootID {
		return
	}
	if n >= nd.nlookup {
		delete(f.nodes, id)
		if rel := nd.f.path(); f.byPath[rel] == id {
			delete(f.byPath, rel)
		}
		nd.f.Close()
		return
	}
	nd.nlookup -= n
}

func (f *FUSE) node(id uint64) (*fnode, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.nodes[id]; n != nil {
		return n, nil
	}
	return nil, unix.ESTALE
}

// handleOf returns the file of the handle fh for one request, which
// calls done when it no longer uses the file.
func (f *FUSE) handleOf(fh uint64) (_ *file, done func(), _ error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.handles[fh]
	if h == nil {
		return nil, nil, unix.EBADF
	}
	h.refs++
	return h.f, func() { f.unref(h) }, nil
}

// unref ends one request's use of h, closing its file if h was released
// meanwhile.
func (f *FUSE) unref(h *fhandle) {
	f.mu.Lock()
	h.refs--
	last := h.refs == 0 && h.gone
	f.mu.Unlock()
	if last {
		h.f.Close()
	}
}

// addHandle gives an opened file a handle, or closes it.
func (f *FUSE) addHandle(h *file) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case !f.inited:
		// DESTROY came meanwhile.
		h.Close()
		return 0, unix.EIO
	case len(f.handles) >= f.fs.lim.OpenFiles:
		h.Close()
		return 0, unix.EMFILE
	}
	f.nextFh++
	f.handles[f.nextFh] = &fhandle{f: h}
	return f.nextFh, nil
}

// dropHandle releases the handle fh; its file is closed once no request
// uses it.
func (f *FUSE) dropHandle(fh uint64) error {
	f.mu.Lock()
	h := f.handles[fh]
	delete(f.handles, fh)
	idle := false
	if h != nil {
		h.gone = true
		idle = h.refs == 0
	}
	f.mu.Unlock()
	if h == nil {
		return unix.EBADF
	}
	if idle {
		return h.f.Close()
	}
	return nil
}

// detach makes the node at rel no longer found by lookup: its file is
// gone or replaced.
func (f *FUSE) detach(rel string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byPath, rel)
}

// entry counts one more lookup of the path rel, whose file is now qid
// with attributes a, and returns its entry.
func (f *FUSE) entry(rel string, qid p9.QID, a p9.Attr) (fp.EntryOut, error) {
	ftype := uint32(a.Mode) & unix.S_IFMT
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.inited {
		return fp.EntryOut{}, unix.EIO // DESTROY came meanwhile
	}
	id, ok := f.byPath[rel]
	if nd := f.nodes[id]; ok && nd != nil && nd.ino == qid.Path && nd.ftype == ftype {
		nd.nlookup++
	} else {
		nf, err := f.fs.newFile(rel)
		if err != nil {
			return fp.EntryOut{}, err
		}
		id = f.nextNode
		f.nextNode++
		f.nodes[id] = &fnode{f: nf, ino: qid.Path, ftype: ftype, nlookup: 1}
		f.byPath[rel] = id
	}
	e := fp.EntryOut{NodeID: id, Attr: fuseAttr(qid, a)}
	e.EntryValid, e.EntryValidNsec = timeout(f.opts.EntryTimeout)
	e.AttrValid, e.AttrValidNsec = timeout(f.opts.AttrTimeout)
	return e, nil
}

func timeout(d time.Duration) (uint64, uint32) {
	if d < 0 {
		return 0, 0
	}
	return uint64(d / time.Second), uint32(d % time.Second)
}

func fuseAttr(qid p9.QID, a p9.Attr) fp.Attr {
	return fp.Attr{
		Ino: qid.Path, Size: a.Size, Blocks: a.Blocks,
		Atime: a.ATimeSeconds, Mtime: a.MTimeSeconds, Ctime: a.CTimeSeconds,
		Atimensec: uint32(a.ATimeNanoSeconds), Mtimensec: uint32(a.MTimeNanoSeconds), Ctimensec: uint32(a.CTimeNanoSeconds),
		Mode: uint32(a.Mode), Nlink: uint32(a.NLink), UID: uint32(a.UID), GID: uint32(a.GID),
		Rdev: uint32(a.RDev), Blksize: uint32(a.BlockSize),
	}
}

// lookupEntry resolves name in the directory dir and counts a lookup.
func (f *FUSE) lookupEntry(dir *file, name string) (fp.EntryOut, error) {
	rel, n, _, err := dir.resolve([]string{name})
	if err != nil {
		return fp.EntryOut{}, err
	}
	return f.entry(rel, f.fs.qid(&n), f.fs.attr(&n))
}

func (f *FUSE) entryReply(unique uint64, e fp.EntryOut) []byte {
	r := newReply(unique, fp.EntryOutSize)
	r.b = e.Append(r.b)
	return r.done()
}

func (f *FUSE) attrReply(unique uint64, qid p9.QID, a p9.Attr) []byte {
	o := fp.AttrOut{Attr: fuseAttr(qid, a)}
	o.AttrValid, o.AttrValidNsec = timeout(f.opts.AttrTimeout)
	r := newReply(unique, fp.AttrOutSize)
	r.b = o.Append(r.b)
	return r.done()
}

// openFlags is what an open's flags mean to the file system: the access
// mode, O_EXCL and O_TRUNC (Linux's values are 9P2000.L's). O_APPEND is
// the kernel's: it sends writes at the end.
func openFlags(flags uint32) p9.OpenFlags {
	return p9.OpenFlags(flags & (unix.O_ACCMODE | dotlExcl | dotlTrunc))
}

// op answers the requests that need an initialized session, under the
// rename lock.
func (f *FUSE) op(h fp.InHeader, args any) ([]byte, error) {
	u := h.Unique
	switch h.Opcode {
	case fp.OpDestroy:
		f.mu.Lock()
		f.dropAll()
		f.inited = false
		f.mu.Unlock()
		return newReply(u, 0).done(), nil
	case fp.OpStatfs:
		root, err := f.node(fp.RootID)
		if err != nil {
			return nil, err
		}
		s, err := root.f.doStatFS()
		if err != nil {
			return nil, err
		}
		r := newReply(u, fp.StatfsOutSize)
		r.b = fp.StatfsOut{Blocks: s.Blocks, Bfree: s.BlocksFree, Bavail: s.BlocksAvailable, Files: s.Files,
			Ffree: s.FilesFree, Bsize: s.BlockSize, Namelen: s.NameLength, Frsize: s.BlockSize}.Append(r.b)
		return r.done(), nil
	case fp.OpAccess, fp.OpLseek, fp.OpFallocate:
		return nil, unix.ENOSYS
	case fp.OpGetxattr:
		return nil, unix.ENODATA
	case fp.OpListxattr, fp.OpSetxattr, fp.OpRemovexattr:
		return nil, unix.EOPNOTSUPP
	case fp.OpRead, fp.OpWrite, fp.OpRelease, fp.OpReleasedir, fp.OpFlush, fp.OpFsync, fp.OpFsyncdir,
		fp.OpReaddir, fp.OpReaddirplus:
		return f.handleOp(h, args)
	}
	if args == nil && h.Opcode != fp.OpReadlink {
		// DecodeArgs knows no arguments of it: not served.
		return nil, unix.ENOSYS
	}
	nd, err := f.node(h.NodeID)
	if err != nil {
		return nil, err
	}
	switch a := args.(type) {
	case fp.NameIn:
		switch h.Opcode {
		case fp.OpLookup:
			e, err := f.lookupEntry(nd.f, a.Name)
			if err != nil {
				return nil, err
			}
			return f.entryReply(u, e), nil
		case fp.OpUnlink, fp.OpRmdir:
			var flags uint32
			if h.Opcode == fp.OpRmdir {
				flags = unix.AT_REMOVEDIR
			}
			if err := nd.f.doUnlinkAt(a.Name, flags); err != nil {
				return nil, err
			}
			f.detach(joinRel(nd.f.path(), a.Name))
			return newReply(u, 0).done(), nil
		}
	case fp.GetattrIn:
		g := nd.f
		if a.Flags&fp.GetattrFh != 0 {
			if hf, done, err := f.handleOf(a.Fh); err == nil {
				defer done()
				g = hf
			}
		}
		qid, _, attr, err := g.doGetAttr(attrAll)
		if err != nil {
			return nil, err
		}
		return f.attrReply(u, qid, attr), nil
	case fp.SetattrIn:
		if err := nd.f.doSetAttr(setAttr(a)); err != nil {
			return nil, err
		}
		qid, _, attr, err := nd.f.doGetAttr(attrAll)
		if err != nil {
			return nil, err
		}
		return f.attrReply(u, qid, attr), nil
	case fp.OpenIn:
		nf, err := f.fs.newFile(nd.f.path())
		if err != nil {
			return nil, err
		}
		mode := openFlags(a.Flags)
		if h.Opcode == fp.OpOpendir {
			mode = p9.ReadOnly
		}
		if _, _, err := nf.doOpen(mode); err != nil {
			nf.Close()
			return nil, err
		}
		fh, err := f.addHandle(nf)
		if err != nil {
			return nil, err
		}
		r := newReply(u, fp.OpenOutSize)
		r.b = fp.OpenOut{Fh: fh}.Append(r.b)
		return r.done(), nil
	case fp.CreateIn:
		pf, _, _, err := nd.f.doCreate(a.Name, openFlags(a.Flags), wirePermissions(a.Mode), 0, 0)
		if err != nil {
			return nil, err
		}
		nf := pf.(*file)
		qid, _, attr, err := nf.doGetAttr(attrAll)
		if err != nil {
			nf.Close()
			return nil, err
		}
		e, err := f.entry(nf.path(), qid, attr)
		if err != nil {
			nf.Close()
			return nil, err
		}
		fh, err := f.addHandle(nf)
		if err != nil {
			f.forget(e.NodeID, 1)
			return nil, err
		}
		r := newReply(u, fp.EntryOutSize+fp.OpenOutSize)
		r.b = e.Append(r.b)
		r.b = fp.OpenOut{Fh: fh}.Append(r.b)
		return r.done(), nil
	case fp.MknodIn:
		if a.Mode&unix.S_IFMT != unix.S_IFREG {
			_, err := nd.f.Mknod(a.Name, p9.FileMode(a.Mode), 0, 0, 0, 0)
			return nil, err
		}
		pf, _, _, err := nd.f.doCreate(a.Name, p9.ReadOnly|dotlExcl, wirePermissions(a.Mode), 0, 0)
		if err != nil {
			return nil, err
		}
		pf.Close()
		return f.made(u, nd.f, a.Name)
	case fp.MkdirIn:
		if _, err := nd.f.doMkdir(a.Name, wirePermissions(a.Mode), 0, 0); err != nil {
			return nil, err
		}
		return f.made(u, nd.f, a.Name)
	case fp.SymlinkIn:
		if _, err := nd.f.doSymlink(a.Target, a.Name, 0, 0); err != nil {
			return nil, err
		}
		return f.made(u, nd.f, a.Name)
	case fp.LinkIn:
		old, err := f.node(a.OldNodeID)
		if err != nil {
			return nil, err
		}
		if err := nd.f.doLink(old.f, a.Name); err != nil {
			return nil, err
		}
		return f.made(u, nd.f, a.Name)
	case fp.RenameIn:
		if a.Flags != 0 {
			return nil, unix.EINVAL
		}
		nd2, err := f.node(a.NewDir)
		if err != nil {
			return nil, err
		}
		from, to := joinRel(nd.f.path(), a.OldName), joinRel(nd2.f.path(), a.NewName)
		if err := nd.f.doRenameAt(a.OldName, nd2.f, a.NewName); err != nil {
			return nil, err
		}
		f.renamed(from, to)
		return newReply(u, 0).done(), nil
	case nil:
		switch h.Opcode {
		case fp.OpReadlink:
			s, err := nd.f.doReadlink()
			if err != nil {
				return nil, err
			}
			r := newReply(u, len(s))
			r.b = append(r.b, s...)
			return r.done(), nil
		}
	}
	return nil, unix.ENOSYS
}

// made answers the creation of name in dir with its entry.
func (f *FUSE) made(unique uint64, dir *file, name string) ([]byte, error) {
	e, err := f.lookupEntry(dir, name)
	if err != nil {
		return nil, err
	}
	return f.entryReply(unique, e), nil
}

// renamed moves the nodes and handles at from and under it to to; the
// node that was at to is no longer found. The rename lock is held
// exclusively.
func (f *FUSE) renamed(from, to string) {
	move := func(rel string) (string, bool) {
		switch {
		case rel == from:
			return to, true
		case strings.HasPrefix(rel, from+"/"):
			return to + rel[len(from):], true
		}
		return "", false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byPath, to)
	for dir := range f.byPath {
		if strings.HasPrefix(dir, to+"/") {
			delete(f.byPath, dir)
		}
	}
	paths := map[string]uint64{}
	for id, n := range f.nodes {
		rel := n.f.path()
		if nr, ok := move(rel); ok {
			if f.byPath[rel] == id {
				delete(f.byPath, rel)
				paths[nr] = id
			}
			n.f.setPath(nr)
		}
	}
	for rel, id := range paths {
		f.byPath[rel] = id
	}
	for _, h := range f.handles {
		if nr, ok := move(h.f.path()); ok {
			h.f.setPath(nr)
		}
	}
}

// handleOp answers the requests on file handles.
func (f *FUSE) handleOp(h fp.InHeader, args any) ([]byte, error) {
	u := h.Unique
	switch a := args.(type) {
	case fp.ReleaseIn:
		if err := f.dropHandle(a.Fh); err != nil {
			return nil, err
		}
		return newReply(u, 0).done(), nil
	case fp.FlushIn:
		_, done, err := f.handleOf(a.Fh)
		if err != nil {
			return nil, err
		}
		done()
		return newReply(u, 0).done(), nil
	case fp.FsyncIn:
		hf, done, err := f.handleOf(a.Fh)
		if err != nil {
			return nil, err
		}
		defer done()
		if h.Opcode == fp.OpFsync {
			if err := hf.doFSync(); err != nil {
				return nil, err
			}
		}
		return newReply(u, 0).done(), nil
	case fp.WriteIn:
		hf, done, err := f.handleOf(a.Fh)
		if err != nil {
			return nil, err
		}
		defer done()
		if a.Offset > 1<<62 {
			return nil, unix.EINVAL
		}
		n, err := hf.doWriteAt(a.Data, int64(a.Offset))
		if err != nil && n == 0 {
			return nil, err
		}
		r := newReply(u, 8)
		r.b = fp.AppendUint32Pair(r.b, uint32(n), 0)
		return r.done(), nil
	case fp.ReadIn:
		hf, done, err := f.handleOf(a.Fh)
		if err != nil {
			return nil, err
		}
		defer done()
		switch h.Opcode {
		case fp.OpRead:
			if a.Offset > 1<<62 {
				return nil, unix.EINVAL
			}
			r := newReply(u, int(a.Size))
			n, err := hf.doReadAt(r.b[fp.OutHeaderSize:fp.OutHeaderSize+int(a.Size)], int64(a.Offset))
			if err != nil && n == 0 {
				return nil, err
			}
			r.b = r.b[:fp.OutHeaderSize+n]
			return r.done(), nil
		case fp.OpReaddir:
			return f.readdir(u, hf, a, false)
		case fp.OpReaddirplus:
			return f.readdir(u, hf, a, true)
		}
	}
	return nil, unix.ENOSYS
}

// readdir answers READDIR and READDIRPLUS from the directory listing a
// 9P Treaddir reads. Entries of READDIRPLUS are looked up (and counted)
// only when they fit; "." and ".." and entries gone since the listing
// carry no node.
func (f *FUSE) readdir(unique uint64, d *file, a fp.ReadIn, plus bool) ([]byte, error) {
	ents, err := d.doReaddir(a.Offset, a.Size)
	if err != nil {
		return nil, err
	}
	r := newReply(unique, int(a.Size))
	for _, e := range ents {
		size := fp.DirentSize(e.Name)
		if plus {
			size = fp.DirentplusSize(e.Name)
		}
		if len(r.b)-fp.OutHeaderSize+size > int(a.Size) {
			break
		}
		typ := uint32(e.Type)
		if plus {
			var eo fp.EntryOut
			if e.Name != "." && e.Name != ".." {
				if got, err := f.lookupEntry(d, e.Name); err == nil {
					eo = got
				}
			}
			if eo.NodeID == 0 {
				eo.Attr = fp.Attr{Ino: e.QID.Path, Mode: typ << 12}
			}
			r.b = eo.Append(r.b)
		}
		r.b = fp.AppendDirent(r.b, e.QID.Path, e.Offset, typ, e.Name)
	}
	return r.done(), nil
}

// setAttr is SETATTR's request as the file system's SetAttr takes it.
// Ownership changes reach it (and are ignored there, as over 9P).
func setAttr(a fp.SetattrIn) (p9.SetAttrMask, p9.SetAttr) {
	v := a.Valid
	m := p9.SetAttrMask{
		Permissions: v&fp.SetattrMode != 0,
		UID:         v&fp.SetattrUID != 0,
		GID:         v&fp.SetattrGID != 0,
		Size:        v&fp.SetattrSize != 0,
		ATime:       v&fp.SetattrAtime != 0,
		MTime:       v&fp.SetattrMtime != 0,
		CTime:       v&fp.SetattrCtime != 0,
	}
	m.ATimeNotSystemTime = m.ATime && v&fp.SetattrAtimeNow == 0
	m.MTimeNotSystemTime = m.MTime && v&fp.SetattrMtimeNow == 0
	return m, p9.SetAttr{
		Permissions: wirePermissions(a.Mode), UID: p9.UID(a.UID), GID: p9.GID(a.GID), Size: a.Size,
		ATimeSeconds: a.Atime, ATimeNanoSeconds: uint64(a.Atimensec),
		MTimeSeconds: a.Mtime, MTimeNanoSeconds: uint64(a.Mtimensec),
	}
}
