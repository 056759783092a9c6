package fuseproto

import (
	"encoding/binary"
	"fmt"
	"syscall"
)

// The protocol version served, and the oldest minor version accepted.
const (
	Major    = 7
	Minor    = 36
	MinMinor = 31
)

// RootID is the node ID of the mount's root.
const RootID = 1

// Opcode is a request's operation.
type Opcode uint32

// Opcodes.
const (
	OpLookup      Opcode = 1
	OpForget      Opcode = 2
	OpGetattr     Opcode = 3
	OpSetattr     Opcode = 4
	OpReadlink    Opcode = 5
	OpSymlink     Opcode = 6
	OpMknod       Opcode = 8
	OpMkdir       Opcode = 9
	OpUnlink      Opcode = 10
	OpRmdir       Opcode = 11
	OpRename      Opcode = 12
	OpLink        Opcode = 13
	OpOpen        Opcode = 14
	OpRead        Opcode = 15
	OpWrite       Opcode = 16
	OpStatfs      Opcode = 17
	OpRelease     Opcode = 18
	OpFsync       Opcode = 20
	OpSetxattr    Opcode = 21
	OpGetxattr    Opcode = 22
	OpListxattr   Opcode = 23
	OpRemovexattr Opcode = 24
	OpFlush       Opcode = 25
	OpInit        Opcode = 26
	OpOpendir     Opcode = 27
	OpReaddir     Opcode = 28
	OpReleasedir  Opcode = 29
	OpFsyncdir    Opcode = 30
	OpGetlk       Opcode = 31
	OpSetlk       Opcode = 32
	OpSetlkw      Opcode = 33
	OpAccess      Opcode = 34
	OpCreate      Opcode = 35
	OpInterrupt   Opcode = 36
	OpBmap        Opcode = 37
	OpDestroy     Opcode = 38
	OpIoctl       Opcode = 39
	OpPoll        Opcode = 40
	OpBatchForget Opcode = 42
	OpFallocate   Opcode = 43
	OpReaddirplus Opcode = 44
	OpRename2     Opcode = 45
	OpLseek       Opcode = 46
	OpCopyRange   Opcode = 47
	OpSetupMap    Opcode = 48
	OpRemoveMap   Opcode = 49
	OpSyncfs      Opcode = 50
)

// INIT flags (fuse_init_in.flags and fuse_init_out.flags).
const (
	InitAsyncRead      = 1 << 0
	InitPosixLocks     = 1 << 1
	InitAtomicOTrunc   = 1 << 3
	InitExportSupport  = 1 << 4
	InitBigWrites      = 1 << 5
	InitDontMask       = 1 << 6
	InitFlockLocks     = 1 << 10
	InitAutoInvalData  = 1 << 12
	InitDoReaddirplus  = 1 << 13
	InitReaddirplusAut = 1 << 14
	InitAsyncDIO       = 1 << 15
	InitWritebackCache = 1 << 16
	InitParallelDirops = 1 << 18
	InitHandleKillpriv = 1 << 19
	InitPosixACL       = 1 << 20
	InitMaxPages       = 1 << 22
	InitCacheSymlinks  = 1 << 23
	InitMapAlignment   = 1 << 26
	InitSubmounts      = 1 << 27
	InitSetxattrExt    = 1 << 29
	InitExt            = 1 << 30
)

// SETATTR valid bits.
const (
	SetattrMode     = 1 << 0
	SetattrUID      = 1 << 1
	SetattrGID      = 1 << 2
	SetattrSize     = 1 << 3
	SetattrAtime    = 1 << 4
	SetattrMtime    = 1 << 5
	SetattrFh       = 1 << 6
	SetattrAtimeNow = 1 << 7
	SetattrMtimeNow = 1 << 8
	SetattrCtime    = 1 << 10
)

// GetattrFh says fuse_getattr_in.fh names an open file.
const GetattrFh = 1 << 0

// Limits of names, link targets and extended attribute values.
const (
	MaxName      = 255
	MaxPath      = 4095
	MaxXattrSize = 64 << 10
)

// Sizes of the fixed parts.
const (
	InHeaderSize  = 40
	OutHeaderSize = 16
	AttrSize      = 88
	EntryOutSize  = 40 + AttrSize
	AttrOutSize   = 16 + AttrSize
	OpenOutSize   = 16
	InitOutSize   = 64
	StatfsOutSize = 80
	direntBase    = 24
)

// Error is a refused request, with the errno to answer it with.
type Error struct {
	Errno syscall.Errno
	What  string
}

func (e *Error) Error() string { return fmt.Sprintf("fuse: %s: %v", e.What, e.Errno) }

func refuse(errno syscall.Errno, format string, args ...any) error {
	return &Error{Errno: errno, What: fmt.Sprintf(format, args...)}
}

var le = binary.LittleEndian

// InHeader is fuse_in_header.
type InHeader struct {
	Len         uint32
	Opcode      Opcode
	Unique      uint64
	NodeID      uint64
	UID, GID    uint32
	PID         uint32
	TotalExtLen uint16
}

// DecodeHeader decodes the header of the request b, which must be the
// whole request: a header whose length is not len(b) is refused, as is
// one announcing extensions (none are negotiated). When b holds a
// header at all, the header is returned with the error, so that the
// refusal can be answered.
func DecodeHeader(b []byte) (InHeader, []byte, error) {
	if len(b) < InHeaderSize {
		return InHeader{}, nil, refuse(syscall.EINVAL, "request of %d bytes is shorter than a header", len(b))
	}
	h := InHeader{
		Len: le.Uint32(b[0:]), Opcode: Opcode(le.Uint32(b[4:])), Unique: le.Uint64(b[8:]),
		NodeID: le.Uint64(b[16:]), UID: le.Uint32(b[24:]), GID: le.Uint32(b[28:]), PID: le.Uint32(b[32:]),
		TotalExtLen: le.Uint16(b[36:]),
	}
	if uint64(h.Len) != uint64(len(b)) {
		return h, nil, refuse(syscall.EINVAL, "header says %d bytes, request has %d", h.Len, len(b))
	}
	if h.TotalExtLen != 0 {
		return h, nil, refuse(syscall.EINVAL, "request extensions were not negotiated")
	}
	return h, b[InHeaderSize:], nil
}

// Append appends the header's encoding to b.
func (h InHeader) Append(b []byte) []byte {
	b = le.AppendUint32(b, h.Len)
	b = le.AppendUint32(b, uint32(h.Opcode))
	b = le.AppendUint64(b, h.Unique)
	b = le.AppendUint64(b, h.NodeID)
	b = le.AppendUint32(b, h.UID)
	b = le.AppendUint32(b, h.GID)
	b = le.AppendUint32(b, h.PID)
	b = le.AppendUint16(b, h.TotalExtLen)
	return le.AppendUint16(b, 0)
}

// PutOutHeader writes fuse_out_header into b[:16]: the reply's whole
// length, its errno (0 for success; sent negated) and the request's
// unique ID.
func PutOutHeader(b []byte, length uint32, errno syscall.Errno, unique uint64) {
	le.PutUint32(b[0:], length)
	le.PutUint32(b[4:], uint32(-int32(errno)))
	le.PutUint64(b[8:], unique)
}

// OutHeader decodes a reply's header: its length, errno and unique ID.
func OutHeader(b []byte) (length uint32, errno syscall.Errno, unique uint64, ok bool) {
	if len(b) < OutHeaderSize {
		return 0, 0, 0, false
	}
	return le.Uint32(b), syscall.Errno(-int32(le.Uint32(b[4:]))), le.Uint64(b[8:]), true
}
