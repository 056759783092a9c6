package fuseproto

// Attr is fuse_attr.
type Attr struct {
	Ino, Size, Blocks               uint64
	Atime, Mtime, Ctime             uint64
	Atimensec, Mtimensec, Ctimensec uint32
	Mode, Nlink, UID, GID, Rdev     uint32
	Blksize, Flags                  uint32
}

// Append appends a's encoding (AttrSize bytes) to b.
func (a Attr) Append(b []byte) []byte {
	for _, v := range []uint64{a.Ino, a.Size, a.Blocks, a.Atime, a.Mtime, a.Ctime} {
		b = le.AppendUint64(b, v)
	}
	for _, v := range []uint32{a.Atimensec, a.Mtimensec, a.Ctimensec, a.Mode, a.Nlink, a.UID, a.GID, a.Rdev, a.Blksize, a.Flags} {
		b = le.AppendUint32(b, v)
	}
	return b
}

// EntryOut is fuse_entry_out: a node the kernel now holds one more
// lookup of (unless NodeID is 0), and how long it may cache the name
// and the attributes.
type EntryOut struct {
	NodeID, Generation            uint64
	EntryValid, AttrValid         uint64
	EntryValidNsec, AttrValidNsec uint32
	Attr                          Attr
}

// Append appends e's encoding (EntryOutSize bytes) to b.
func (e EntryOut) Append(b []byte) []byte {
	b = le.AppendUint64(b, e.NodeID)
	b = le.AppendUint64(b, e.Generation)
	b = le.AppendUint64(b, e.EntryValid)
	b = le.AppendUint64(b, e.AttrValid)
	b = le.AppendUint32(b, e.EntryValidNsec)
	b = le.AppendUint32(b, e.AttrValidNsec)
	return e.Attr.Append(b)
}

// AttrOut is fuse_attr_out.
type AttrOut struct {
	AttrValid     uint64
	AttrValidNsec uint32
	Attr          Attr
}

// Append appends o's encoding (AttrOutSize bytes) to b.
func (o AttrOut) Append(b []byte) []byte {
	b = le.AppendUint64(b, o.AttrValid)
	b = le.AppendUint32(b, o.AttrValidNsec)
	b = le.AppendUint32(b, 0)
	return o.Attr.Append(b)
}

// OpenOut is fuse_open_out.
type OpenOut struct {
	Fh        uint64
	OpenFlags uint32
}

// Append appends o's encoding (OpenOutSize bytes) to b.
func (o OpenOut) Append(b []byte) []byte {
	b = le.AppendUint64(b, o.Fh)
	b = le.AppendUint32(b, o.OpenFlags)
	return le.AppendUint32(b, 0)
}

// InitOut is fuse_init_out.
type InitOut struct {
	Major, Minor, MaxReadahead, Flags  uint32
	MaxBackground, CongestionThreshold uint16
	MaxWrite, TimeGran                 uint32
	MaxPages, MapAlignment             uint16
	Flags2                             uint32
}

// Append appends o's encoding (InitOutSize bytes) to b.
func (o InitOut) Append(b []byte) []byte {
	b = le.AppendUint32(b, o.Major)
	b = le.AppendUint32(b, o.Minor)
	b = le.AppendUint32(b, o.MaxReadahead)
	b = le.AppendUint32(b, o.Flags)
	b = le.AppendUint16(b, o.MaxBackground)
	b = le.AppendUint16(b, o.CongestionThreshold)
	b = le.AppendUint32(b, o.MaxWrite)
	b = le.AppendUint32(b, o.TimeGran)
	b = le.AppendUint16(b, o.MaxPages)
	b = le.AppendUint16(b, o.MapAlignment)
	b = le.AppendUint32(b, o.Flags2)
	return append(b, make([]byte, 28)...)
}

// StatfsOut is fuse_statfs_out.
type StatfsOut struct {
	Blocks, Bfree, Bavail, Files, Ffree uint64
	Bsize, Namelen, Frsize              uint32
}

// Append appends s's encoding (StatfsOutSize bytes) to b.
func (s StatfsOut) Append(b []byte) []byte {
	for _, v := range []uint64{s.Blocks, s.Bfree, s.Bavail, s.Files, s.Ffree} {
		b = le.AppendUint64(b, v)
	}
	for _, v := range []uint32{s.Bsize, s.Namelen, s.Frsize} {
		b = le.AppendUint32(b, v)
	}
	return append(b, make([]byte, 28)...)
}

// AppendUint32Pair appends two 32-bit fields: fuse_write_out and
// fuse_getxattr_out (a size and padding).
func AppendUint32Pair(b []byte, v, w uint32) []byte {
	return le.AppendUint32(le.AppendUint32(b, v), w)
}

// DirentSize is the size of a fuse_dirent for name, padded to 8 bytes.
func DirentSize(name string) int { return (direntBase + len(name) + 7) &^ 7 }

// DirentplusSize is the size of a fuse_direntplus for name.
func DirentplusSize(name string) int { return EntryOutSize + DirentSize(name) }

// AppendDirent appends a fuse_dirent: the entry's inode number, the
// offset of the entry after it, its d_type and name.
func AppendDirent(b []byte, ino, off uint64, typ uint32, name string) []byte {
	b = le.AppendUint64(b, ino)
	b = le.AppendUint64(b, off)
	b = le.AppendUint32(b, uint32(len(name)))
	b = le.AppendUint32(b, typ)
	b = append(b, name...)
	return append(b, make([]byte, DirentSize(name)-direntBase-len(name))...)
}

// EncodeRequest encodes a request with header h (its Len set here)
// and arguments args, one of DecodeArgs's types or nil. It is what a
// kernel would send; tests and clients use it.
func EncodeRequest(h InHeader, args any) []byte {
	var p []byte
	cs := func(s string) { p = append(append(p, s...), 0) }
	u32 := func(v ...uint32) {
		for _, x := range v {
			p = le.AppendUint32(p, x)
		}
	}
	u64 := func(v ...uint64) {
		for _, x := range v {
			p = le.AppendUint64(p, x)
		}
	}
	switch a := args.(type) {
	case InitIn:
		u32(a.Major, a.Minor, a.MaxReadahead, a.Flags, a.Flags2)
		p = append(p, make([]byte, 44)...)
	case NameIn:
		cs(a.Name)
	case ForgetIn:
		u64(a.Nlookup)
	case BatchForgetIn:
		u32(uint32(len(a.Forgets)), 0)
		for _, f := range a.Forgets {
			u64(f.NodeID, f.Nlookup)
		}
	case GetattrIn:
		u32(a.Flags, 0)
		u64(a.Fh)
	case SetattrIn:
		u32(a.Valid, 0)
		u64(a.Fh, a.Size, a.LockOwner, a.Atime, a.Mtime, a.Ctime)
		u32(a.Atimensec, a.Mtimensec, a.Ctimensec, a.Mode, 0, a.UID, a.GID, 0)
	case MknodIn:
		u32(a.Mode, a.Rdev, a.Umask, 0)
		cs(a.Name)
	case MkdirIn:
		u32(a.Mode, a.Umask)
		cs(a.Name)
	case SymlinkIn:
		cs(a.Name)
		cs(a.Target)
	case RenameIn:
		u64(a.NewDir)
		if h.Opcode == OpRename2 {
			u32(a.Flags, 0)
		}
		cs(a.OldName)
		cs(a.NewName)
	case LinkIn:
		u64(a.OldNodeID)
		cs(a.Name)
	case OpenIn:
		u32(a.Flags, a.OpenFlags)
	case CreateIn:
		u32(a.Flags, a.Mode, a.Umask, a.OpenFlags)
		cs(a.Name)
	case ReadIn:
		u64(a.Fh, a.Offset)
		u32(a.Size, a.ReadFlags)
		u64(a.LockOwner)
		u32(a.Flags, 0)
	case WriteIn:
		u64(a.Fh, a.Offset)
		u32(a.Size, a.WriteFlags)
		u64(a.LockOwner)
		u32(a.Flags, 0)
		p = append(p, a.Data...)
	case ReleaseIn:
		u64(a.Fh)
		u32(a.Flags, a.ReleaseFlags)
		u64(a.LockOwner)
	case FlushIn:
		u64(a.Fh)
		u32(0, 0)
		u64(a.LockOwner)
	case FsyncIn:
		u64(a.Fh)
		u32(a.FsyncFlags, 0)
	case GetxattrIn:
		u32(a.Size, 0)
		if h.Opcode != OpListxattr {
			cs(a.Name)
		}
	case SetxattrIn:
		u32(a.Size, a.Flags)
		cs(a.Name)
		p = append(p, a.Value...)
	case AccessIn:
		u32(a.Mask, 0)
	case InterruptIn:
		u64(a.Unique)
	case LseekIn:
		u64(a.Fh, a.Offset)
		u32(a.Whence, 0)
	case FallocateIn:
		u64(a.Fh, a.Offset, a.Length)
		u32(a.Mode, 0)
	}
	h.Len = uint32(InHeaderSize + len(p))
	return append(h.Append(nil), p...)
}
