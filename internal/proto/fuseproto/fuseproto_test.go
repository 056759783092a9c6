package fuseproto

import (
	"errors"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

const testMaxWrite = 128 << 10

func decode(b []byte) (InHeader, any, error) {
	h, body, err := DecodeHeader(b)
	if err != nil {
		return h, nil, err
	}
	a, err := DecodeArgs(h, body, testMaxWrite)
	return h, a, err
}

func errnoOf(err error) syscall.Errno {
	var e *Error
	if errors.As(err, &e) {
		return e.Errno
	}
	return 0
}

var samples = []struct {
	op   Opcode
	args any
}{
	{OpInit, InitIn{Major: 7, Minor: 38, MaxReadahead: 1 << 17, Flags: InitExt | InitAsyncRead, Flags2: 3}},
	{OpLookup, NameIn{Name: "main.go"}},
	{OpForget, ForgetIn{Nlookup: 3}},
	{OpBatchForget, BatchForgetIn{Forgets: []ForgetOne{{2, 1}, {3, 9}}}},
	{OpGetattr, GetattrIn{Flags: GetattrFh, Fh: 7}},
	{OpSetattr, SetattrIn{Valid: SetattrMode | SetattrSize, Size: 9, Mode: 0o644, Atime: 1, Mtimensec: 2, UID: 5, GID: 6}},
	{OpSymlink, SymlinkIn{Name: "l", Target: "../x"}},
	{OpMknod, MknodIn{Mode: 0o100644, Name: "f"}},
	{OpMkdir, MkdirIn{Mode: 0o755, Umask: 0o22, Name: "d"}},
	{OpRename, RenameIn{NewDir: 1, OldName: "a", NewName: "b"}},
	{OpRename2, RenameIn{NewDir: 1, Flags: 1, OldName: "a", NewName: "b"}},
	{OpLink, LinkIn{OldNodeID: 4, Name: "h"}},
	{OpOpen, OpenIn{Flags: 2}},
	{OpCreate, CreateIn{Flags: 0o1102, Mode: 0o100600, Name: "c"}},
	{OpRead, ReadIn{Fh: 1, Offset: 4096, Size: 4096}},
	{OpWrite, WriteIn{Fh: 1, Offset: 3, Size: 5, Data: []byte("hello")}},
	{OpRelease, ReleaseIn{Fh: 1, Flags: 2, LockOwner: 9}},
	{OpFlush, FlushIn{Fh: 1, LockOwner: 9}},
	{OpFsync, FsyncIn{Fh: 1, FsyncFlags: 1}},
	{OpGetxattr, GetxattrIn{Size: 64, Name: "security.capability"}},
	{OpListxattr, GetxattrIn{Size: 64}},
	{OpSetxattr, SetxattrIn{Size: 2, Name: "user.x", Value: []byte("ab")}},
	{OpRemovexattr, NameIn{Name: "user.x"}},
	{OpAccess, AccessIn{Mask: 4}},
	{OpInterrupt, InterruptIn{Unique: 12}},
	{OpLseek, LseekIn{Fh: 1, Offset: 5, Whence: 3}},
	{OpFallocate, FallocateIn{Fh: 1, Length: 10}},
	{OpStatfs, nil},
}

func TestRoundTrip(t *testing.T) {
	for _, s := range samples {
		h := InHeader{Opcode: s.op, Unique: 42, NodeID: 1, UID: 1000}
		b := EncodeRequest(h, s.args)
		gh, a, err := decode(b)
		if err != nil {
			t.Errorf("op %d: %v", s.op, err)
			continue
		}
		h.Len = uint32(len(b))
		if gh != h || !reflect.DeepEqual(a, s.args) {
			t.Errorf("op %d: decoded %+v %+v, want %+v %+v", s.op, gh, a, h, s.args)
		}
	}
}

func TestRefusals(t *testing.T) {
	lookup := func(name string) []byte { return EncodeRequest(InHeader{Opcode: OpLookup}, NameIn{Name: name}) }
	lie := EncodeRequest(InHeader{Opcode: OpGetattr}, GetattrIn{})
	le.PutUint32(lie, uint32(len(lie)+8))
	short := EncodeRequest(InHeader{Opcode: OpGetattr}, GetattrIn{})
	short = short[:len(short)-1]
	le.PutUint32(short, uint32(len(short)))
	hugeWrite := EncodeRequest(InHeader{Opcode: OpWrite}, WriteIn{Size: testMaxWrite + 1, Data: make([]byte, testMaxWrite+1)})
	lyingWrite := EncodeRequest(InHeader{Opcode: OpWrite}, WriteIn{Size: 100, Data: []byte("x")})
	hugeRead := EncodeRequest(InHeader{Opcode: OpRead}, ReadIn{Size: 1 << 31})
	batch := EncodeRequest(InHeader{Opcode: OpBatchForget}, BatchForgetIn{Forgets: []ForgetOne{{2, 1}}})
	le.PutUint32(batch[InHeaderSize:], 1<<30)
	noNUL := lookup("a")
	noNUL = noNUL[:len(noNUL)-1]
	le.PutUint32(noNUL, uint32(len(noNUL)))
	trailing := append(lookup("a"), 'x')
	le.PutUint32(trailing, uint32(len(trailing)))
	ext := lookup("a")
	le.PutUint16(ext[36:], 8)
	for what, c := range map[string]struct {
		b    []byte
		want syscall.Errno
	}{
		"truncated header":       {make([]byte, 39), syscall.EINVAL},
		"length that lies":       {lie, syscall.EINVAL},
		"short fixed part":       {short, syscall.EINVAL},
		"empty name":             {lookup(""), syscall.EINVAL},
		"dot":                    {lookup("."), syscall.EINVAL},
		"dot dot":                {lookup(".."), syscall.EINVAL},
		"slash":                  {lookup("a/b"), syscall.EINVAL},
		"long name":              {lookup(strings.Repeat("n", 256)), syscall.ENAMETOOLONG},
		"name without NUL":       {noNUL, syscall.EINVAL},
		"bytes after the name":   {trailing, syscall.EINVAL},
		"write beyond max_write": {hugeWrite, syscall.EINVAL},
		"write size that lies":   {lyingWrite, syscall.EINVAL},
		"read beyond max_write":  {hugeRead, syscall.EINVAL},
		"forget count that lies": {batch, syscall.EINVAL},
		"extensions":             {ext, syscall.EINVAL},
		"long link target":       {EncodeRequest(InHeader{Opcode: OpSymlink}, SymlinkIn{Name: "l", Target: strings.Repeat("t", 4096)}), syscall.ENAMETOOLONG},
		"second name with slash": {EncodeRequest(InHeader{Opcode: OpRename}, RenameIn{OldName: "a", NewName: "b/c"}), syscall.EINVAL},
	} {
		_, _, err := decode(c.b)
		if got := errnoOf(err); got != c.want {
			t.Errorf("%s: got %v (%v), want %v", what, got, err, c.want)
		}
	}
	if a, err := DecodeArgs(InHeader{Opcode: 9999}, []byte("junk"), testMaxWrite); a != nil || err != nil {
		t.Errorf("an unknown opcode decodes to %v, %v; want nil, nil", a, err)
	}
	if long := lookup(strings.Repeat("n", 255)); errnoOf(func() error { _, _, err := decode(long); return err }()) != 0 {
		t.Errorf("a name of 255 bytes was refused")
	}
}

func TestReplies(t *testing.T) {
	if n := len(Attr{}.Append(nil)); n != AttrSize {
		t.Errorf("fuse_attr is %d bytes, want %d", n, AttrSize)
	}
	for what, c := range map[string][2]int{
		"entry_out":  {len(EntryOut{}.Append(nil)), EntryOutSize},
		"attr_out":   {len(AttrOut{}.Append(nil)), AttrOutSize},
		"open_out":   {len(OpenOut{}.Append(nil)), OpenOutSize},
		"init_out":   {len(InitOut{}.Append(nil)), InitOutSize},
		"statfs_out": {len(StatfsOut{}.Append(nil)), StatfsOutSize},
		"dirent":     {len(AppendDirent(nil, 1, 2, 4, "abc")), 32},
		"dirent 8":   {len(AppendDirent(nil, 1, 2, 4, "abcdefgh")), 32},
		"dirent 9":   {len(AppendDirent(nil, 1, 2, 4, "abcdefghi")), 40},
	} {
		if c[0] != c[1] {
			t.Errorf("%s is %d bytes, want %d", what, c[0], c[1])
		}
	}
	b := make([]byte, OutHeaderSize)
	PutOutHeader(b, 16, syscall.ENOENT, 77)
	if l, e, u, ok := OutHeader(b); !ok || l != 16 || e != syscall.ENOENT || u != 77 {
		t.Errorf("out header round trip: %d %v %d %v", l, e, u, ok)
	}
}

// FuzzDecode: any bytes decode to a refusal or to arguments within the
// bounds, and what decodes encodes back to the same fields.
func FuzzDecode(f *testing.F) {
	for _, s := range samples {
		f.Add(EncodeRequest(InHeader{Opcode: s.op, Unique: 1, NodeID: 1}, s.args))
	}
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, a, err := decode(b)
		if err != nil {
			if errnoOf(err) == 0 {
				t.Fatalf("refusal without an errno: %v", err)
			}
			return
		}
		check := func(name string) {
			if name == "" || len(name) > MaxName || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
				t.Fatalf("bad name %q accepted", name)
			}
		}
		switch a := a.(type) {
		case NameIn:
			if h.Opcode != OpRemovexattr {
				check(a.Name)
			}
		case MkdirIn:
			check(a.Name)
		case MknodIn:
			check(a.Name)
		case CreateIn:
			check(a.Name)
		case LinkIn:
			check(a.Name)
		case SymlinkIn:
			check(a.Name)
			if len(a.Target) > MaxPath || a.Target == "" {
				t.Fatalf("bad target of %d bytes accepted", len(a.Target))
			}
		case RenameIn:
			check(a.OldName)
			check(a.NewName)
		case WriteIn:
			if len(a.Data) > testMaxWrite || int(a.Size) != len(a.Data) {
				t.Fatalf("write of %d bytes (size %d) accepted", len(a.Data), a.Size)
			}
		case ReadIn:
			if a.Size > testMaxWrite {
				t.Fatalf("read of %d accepted", a.Size)
			}
		case InitIn:
			return // its unused tail and flags2 need not round-trip
		case nil:
			return
		}
		// Padding is not kept; the fields are.
		h2, a2, err := decode(EncodeRequest(h, a))
		if err != nil || h2 != h || !reflect.DeepEqual(a2, a) {
			t.Fatalf("re-encoded differently: %+v %+v %v; was %+v %+v", h2, a2, err, h, a)
		}
	})
}
