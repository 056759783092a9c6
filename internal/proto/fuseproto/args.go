package fuseproto

import (
	"bytes"
	"syscall"
)

// Request arguments, one type per layout. DecodeArgs returns a value
// of one of these (or nil for an opcode without arguments or one it
// does not know).
type (
	// InitIn is INIT's fuse_init_in; Flags2 is zero unless Flags has
	// InitExt.
	InitIn struct{ Major, Minor, MaxReadahead, Flags, Flags2 uint32 }
	// NameIn is the one name of LOOKUP, UNLINK, RMDIR and REMOVEXATTR.
	NameIn struct{ Name string }
	// ForgetIn is FORGET's count.
	ForgetIn struct{ Nlookup uint64 }
	// ForgetOne is one node of a BATCH_FORGET.
	ForgetOne struct{ NodeID, Nlookup uint64 }
	// BatchForgetIn is BATCH_FORGET's nodes.
	BatchForgetIn struct{ Forgets []ForgetOne }
	// GetattrIn is GETATTR's fuse_getattr_in.
	GetattrIn struct {
		Flags uint32
		Fh    uint64
	}
	// SetattrIn is SETATTR's fuse_setattr_in.
	SetattrIn struct {
		Valid                           uint32
		Fh, Size, LockOwner             uint64
		Atime, Mtime, Ctime             uint64
		Atimensec, Mtimensec, Ctimensec uint32
		Mode, UID, GID                  uint32
	}
	// MknodIn is MKNOD's fuse_mknod_in and name.
	MknodIn struct {
		Mode, Rdev, Umask uint32
		Name              string
	}
	// MkdirIn is MKDIR's fuse_mkdir_in and name.
	MkdirIn struct {
		Mode, Umask uint32
		Name        string
	}
	// SymlinkIn is SYMLINK's new name and the link's target.
	SymlinkIn struct{ Name, Target string }
	// RenameIn is RENAME's and RENAME2's arguments (Flags is 0 for RENAME).
	RenameIn struct {
		NewDir           uint64
		Flags            uint32
		OldName, NewName string
	}
	// LinkIn is LINK's fuse_link_in and new name.
	LinkIn struct {
		OldNodeID uint64
		Name      string
	}
	// OpenIn is OPEN's and OPENDIR's fuse_open_in.
	OpenIn struct{ Flags, OpenFlags uint32 }
	// CreateIn is CREATE's fuse_create_in and name.
	CreateIn struct {
		Flags, Mode, Umask, OpenFlags uint32
		Name                          string
	}
	// ReadIn is READ's, READDIR's and READDIRPLUS's fuse_read_in.
	ReadIn struct {
		Fh, Offset      uint64
		Size, ReadFlags uint32
		LockOwner       uint64
		Flags           uint32
	}
	// WriteIn is WRITE's fuse_write_in and data (part of the request).
	WriteIn struct {
		Fh, Offset       uint64
		Size, WriteFlags uint32
		LockOwner        uint64
		Flags            uint32
		Data             []byte
	}
	// ReleaseIn is RELEASE's and RELEASEDIR's fuse_release_in.
	ReleaseIn struct {
		Fh                  uint64
		Flags, ReleaseFlags uint32
		LockOwner           uint64
	}
	// FlushIn is FLUSH's fuse_flush_in.
	FlushIn struct{ Fh, LockOwner uint64 }
	// FsyncIn is FSYNC's and FSYNCDIR's fuse_fsync_in.
	FsyncIn struct {
		Fh         uint64
		FsyncFlags uint32
	}
	// GetxattrIn is GETXATTR's and LISTXATTR's fuse_getxattr_in (Name is
	// empty for LISTXATTR).
	GetxattrIn struct {
		Size uint32
		Name string
	}
	// SetxattrIn is SETXATTR's fuse_setxattr_in (the 8-byte form: the
	// extended one is not negotiated), name and value.
	SetxattrIn struct {
		Size, Flags uint32
		Name        string
		Value       []byte
	}
	// AccessIn is ACCESS's fuse_access_in.
	AccessIn struct{ Mask uint32 }
	// InterruptIn is INTERRUPT's fuse_interrupt_in.
	InterruptIn struct{ Unique uint64 }
	// LseekIn is LSEEK's fuse_lseek_in.
	LseekIn struct {
		Fh, Offset uint64
		Whence     uint32
	}
	// FallocateIn is FALLOCATE's fuse_fallocate_in.
	FallocateIn struct {
		Fh, Offset, Length uint64
		Mode               uint32
	}
)

// reader takes fixed fields and names off a request's body.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(errno syscall.Errno, format string, args ...any) {
	if r.err == nil {
		r.err = refuse(errno, format, args...)
	}
}

func (r *reader) fixed(n int) []byte {
	if r.err != nil {
		return make([]byte, n)
	}
	if len(r.b) < n {
		r.fail(syscall.EINVAL, "arguments of %d bytes, want at least %d", len(r.b), n)
		return make([]byte, n)
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

// cstring takes a NUL-terminated string of at most max bytes.
func (r *reader) cstring(max int) string {
	if r.err != nil {
		return ""
	}
	i := bytes.IndexByte(r.b, 0)
	if i < 0 {
		r.fail(syscall.EINVAL, "string without its terminating NUL")
		return ""
	}
	if i > max {
		r.fail(syscall.ENAMETOOLONG, "string of %d bytes, at most %d", i, max)
		return ""
	}
	s := string(r.b[:i])
	r.b = r.b[i+1:]
	return s
}

// name takes a directory entry's name.
func (r *reader) name() string {
	s := r.cstring(MaxName)
	if r.err != nil {
		return ""
	}
	switch {
	case s == "", s == ".", s == "..":
		r.fail(syscall.EINVAL, "name %q", s)
	case bytes.IndexByte([]byte(s), '/') >= 0:
		r.fail(syscall.EINVAL, "name %q holds a slash", s)
	}
	return s
}

// end refuses bytes left over.
func (r *reader) end() {
	if r.err == nil && len(r.b) != 0 {
		r.fail(syscall.EINVAL, "%d bytes after the arguments", len(r.b))
	}
}

// exact takes a fixed part that must be the whole body.
func (r *reader) exact(n int) []byte {
	if r.err == nil && len(r.b) != n {
		r.fail(syscall.EINVAL, "arguments of %d bytes, want %d", len(r.b), n)
	}
	p := r.fixed(n)
	r.end()
	return p
}

// DecodeArgs decodes the arguments body of a request with header h
// (as DecodeHeader returned them). maxWrite is the negotiated
// max_write: WRITE's data and the sizes READ, READDIR and READDIRPLUS
// ask for are refused beyond it. An opcode DecodeArgs does not know
// returns nil, nil: the caller answers ENOSYS.
func DecodeArgs(h InHeader, body []byte, maxWrite uint32) (any, error) {
	r := &reader{b: body}
	var a any
	switch h.Opcode {
	case OpInit:
		p := r.fixed(16)
		in := InitIn{Major: le.Uint32(p), Minor: le.Uint32(p[4:]), MaxReadahead: le.Uint32(p[8:]), Flags: le.Uint32(p[12:])}
		if in.Flags&InitExt != 0 && len(r.b) >= 4 {
			in.Flags2 = le.Uint32(r.b)
		}
		if len(r.b) > 48 {
			r.fail(syscall.EINVAL, "INIT arguments of %d bytes", len(body))
		}
		a = in
	case OpLookup, OpUnlink, OpRmdir:
		a = NameIn{Name: r.name()}
		r.end()
	case OpRemovexattr:
		a = NameIn{Name: r.xattrName()}
		r.end()
	case OpForget:
		a = ForgetIn{Nlookup: le.Uint64(r.exact(8))}
	case OpBatchForget:
		p := r.fixed(8)
		n := le.Uint32(p)
		if r.err == nil && uint64(len(r.b)) != uint64(n)*16 {
			r.fail(syscall.EINVAL, "BATCH_FORGET of %d nodes in %d bytes", n, len(r.b))
		}
		var in BatchForgetIn
		if r.err == nil {
			in.Forgets = make([]ForgetOne, n)
			for i := range in.Forgets {
				in.Forgets[i] = ForgetOne{NodeID: le.Uint64(r.b[16*i:]), Nlookup: le.Uint64(r.b[16*i+8:])}
			}
			r.b = nil
		}
		a = in
	case OpGetattr:
		p := r.exact(16)
		a = GetattrIn{Flags: le.Uint32(p), Fh: le.Uint64(p[8:])}
	case OpSetattr:
		p := r.exact(88)
		a = SetattrIn{
			Valid: le.Uint32(p), Fh: le.Uint64(p[8:]), Size: le.Uint64(p[16:]), LockOwner: le.Uint64(p[24:]),
			Atime: le.Uint64(p[32:]), Mtime: le.Uint64(p[40:]), Ctime: le.Uint64(p[48:]),
			Atimensec: le.Uint32(p[56:]), Mtimensec: le.Uint32(p[60:]), Ctimensec: le.Uint32(p[64:]),
			Mode: le.Uint32(p[68:]), UID: le.Uint32(p[76:]), GID: le.Uint32(p[80:]),
		}
	case OpReadlink, OpStatfs, OpDestroy, OpSyncfs:
		r.end()
	case OpSymlink:
		in := SymlinkIn{Name: r.name()}
		in.Target = r.cstring(MaxPath)
		if r.err == nil && in.Target == "" {
			r.fail(syscall.ENOENT, "empty link target")
		}
		r.end()
		a = in
	case OpMknod:
		p := r.fixed(16)
		a = MknodIn{Mode: le.Uint32(p), Rdev: le.Uint32(p[4:]), Umask: le.Uint32(p[8:]), Name: r.name()}
		r.end()
	case OpMkdir:
		p := r.fixed(8)
		a = MkdirIn{Mode: le.Uint32(p), Umask: le.Uint32(p[4:]), Name: r.name()}
		r.end()
	case OpRename, OpRename2:
		in := RenameIn{NewDir: le.Uint64(r.fixed(8))}
		if h.Opcode == OpRename2 {
			in.Flags = le.Uint32(r.fixed(8))
		}
		in.OldName = r.name()
		in.NewName = r.name()
		r.end()
		a = in
	case OpLink:
		a = LinkIn{OldNodeID: le.Uint64(r.fixed(8)), Name: r.name()}
		r.end()
	case OpOpen, OpOpendir:
		p := r.exact(8)
		a = OpenIn{Flags: le.Uint32(p), OpenFlags: le.Uint32(p[4:])}
	case OpCreate:
		p := r.fixed(16)
		a = CreateIn{Flags: le.Uint32(p), Mode: le.Uint32(p[4:]), Umask: le.Uint32(p[8:]), OpenFlags: le.Uint32(p[12:]), Name: r.name()}
		r.end()
	case OpRead, OpReaddir, OpReaddirplus:
		p := r.exact(40)
		in := ReadIn{Fh: le.Uint64(p), Offset: le.Uint64(p[8:]), Size: le.Uint32(p[16:]), ReadFlags: le.Uint32(p[20:]),
			LockOwner: le.Uint64(p[24:]), Flags: le.Uint32(p[32:])}
		if r.err == nil && in.Size > maxWrite {
			r.fail(syscall.EINVAL, "read of %d bytes, at most %d", in.Size, maxWrite)
		}
		a = in
	case OpWrite:
		p := r.fixed(40)
		in := WriteIn{Fh: le.Uint64(p), Offset: le.Uint64(p[8:]), Size: le.Uint32(p[16:]), WriteFlags: le.Uint32(p[20:]),
			LockOwner: le.Uint64(p[24:]), Flags: le.Uint32(p[32:])}
		switch {
		case r.err != nil:
		case in.Size > maxWrite:
			r.fail(syscall.EINVAL, "write of %d bytes, at most %d", in.Size, maxWrite)
		case uint64(in.Size) != uint64(len(r.b)):
			r.fail(syscall.EINVAL, "write of %d bytes carries %d", in.Size, len(r.b))
		default:
			in.Data = r.b
			r.b = nil
		}
		a = in
	case OpRelease, OpReleasedir:
		p := r.exact(24)
		a = ReleaseIn{Fh: le.Uint64(p), Flags: le.Uint32(p[8:]), ReleaseFlags: le.Uint32(p[12:]), LockOwner: le.Uint64(p[16:])}
	case OpFlush:
		p := r.exact(24)
		a = FlushIn{Fh: le.Uint64(p), LockOwner: le.Uint64(p[16:])}
	case OpFsync, OpFsyncdir:
		p := r.exact(16)
		a = FsyncIn{Fh: le.Uint64(p), FsyncFlags: le.Uint32(p[8:])}
	case OpGetxattr:
		in := GetxattrIn{Size: le.Uint32(r.fixed(8))}
		in.Name = r.xattrName()
		r.end()
		a = in
	case OpListxattr:
		a = GetxattrIn{Size: le.Uint32(r.exact(8))}
	case OpSetxattr:
		p := r.fixed(8)
		in := SetxattrIn{Size: le.Uint32(p), Flags: le.Uint32(p[4:])}
		in.Name = r.xattrName()
		switch {
		case r.err != nil:
		case in.Size > MaxXattrSize:
			r.fail(syscall.E2BIG, "attribute value of %d bytes", in.Size)
		case uint64(in.Size) != uint64(len(r.b)):
			r.fail(syscall.EINVAL, "attribute value of %d bytes carries %d", in.Size, len(r.b))
		default:
			in.Value = r.b
			r.b = nil
		}
		a = in
	case OpAccess:
		a = AccessIn{Mask: le.Uint32(r.exact(8))}
	case OpInterrupt:
		a = InterruptIn{Unique: le.Uint64(r.exact(8))}
	case OpLseek:
		p := r.exact(24)
		a = LseekIn{Fh: le.Uint64(p), Offset: le.Uint64(p[8:]), Whence: le.Uint32(p[16:])}
	case OpFallocate:
		p := r.exact(32)
		a = FallocateIn{Fh: le.Uint64(p), Offset: le.Uint64(p[8:]), Length: le.Uint64(p[16:]), Mode: le.Uint32(p[24:])}
	default:
		return nil, nil
	}
	if r.err != nil {
		return nil, r.err
	}
	return a, nil
}

// xattrName takes an extended attribute's name: non-empty, at most 255
// bytes.
func (r *reader) xattrName() string {
	s := r.cstring(MaxName)
	if r.err == nil && s == "" {
		r.fail(syscall.ERANGE, "empty attribute name")
	}
	return s
}
