package cpio

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"strings"
)

// Unix file type bits of Entry.Mode.
const (
	TypeMask    = 0o170000
	TypeFIFO    = 0o010000
	TypeChar    = 0o020000
	TypeDir     = 0o040000
	TypeBlock   = 0o060000
	TypeRegular = 0o100000
	TypeSymlink = 0o120000
	TypeSocket  = 0o140000
)

const (
	magic      = "070701"
	headerSize = 110
	trailer    = "TRAILER!!!"
)

// Entry is the header of one archive member.
type Entry struct {
	// Name is the slash-separated path inside the archive, such as
	// "bin/sh"; "." is the root. A leading "/" or "./" is dropped. It must
	// be clean and must not climb out with "..".
	Name string
	// Mode is the Unix mode: one Type bit pattern plus permission,
	// setuid, setgid and sticky bits.
	Mode     uint32
	UID, GID uint32
	// Size is the length of a regular file's data. Other types have none;
	// a symbolic link's data is its Linkname.
	Size int64
	// Linkname is a symbolic link's target.
	Linkname string
	// HardLink names an earlier regular file of the same archive that
	// this entry is another name for. Mode, UID, GID and Size are then
	// taken from that file.
	HardLink string
	// NLink is how many names a regular file has, counting hard links
	// written after it. Zero means one.
	NLink uint32
	// DevMajor and DevMinor are a character or block device's numbers.
	DevMajor, DevMinor uint32
}

// inode is what later hard links need to know about a regular file.
type inode struct {
	ino, mode, uid, gid, nlink uint32
	names                      uint32 // names written so far
}

// Writer writes a newc archive to an io.Writer.
type Writer struct {
	w      io.Writer
	mtime  int64
	ino    uint32
	files  map[string]*inode
	names  map[string]bool
	err    error // sticky: a failed write leaves the archive unusable
	closed bool
	hdr    [headerSize]byte
}

// NewWriter returns a Writer that stamps every entry with mtime, in
// seconds since the Unix epoch (0 to 2^32-1).
func NewWriter(w io.Writer, mtime int64) *Writer {
	cw := &Writer{w: w, mtime: mtime, files: map[string]*inode{}, names: map[string]bool{}}
	if mtime < 0 || mtime > math.MaxUint32 {
		cw.err = fmt.Errorf("cpio: modification time %d does not fit the newc format", mtime)
	}
	return cw
}

// CleanName returns name as it is stored in an archive, or an error saying
// why it cannot be.
func CleanName(name string) (string, error) {
	n := strings.TrimPrefix(name, "/")
	for strings.HasPrefix(n, "./") {
		n = strings.TrimLeft(n[2:], "/")
	}
	if n == "" {
		n = "."
	}
	switch {
	case strings.ContainsRune(n, 0):
		return "", fmt.Errorf("cpio: name %q contains a NUL byte", name)
	case path.Clean(n) != n:
		return "", fmt.Errorf("cpio: name %q is not clean (want %q)", name, path.Clean(n))
	case n == ".." || strings.HasPrefix(n, "../"):
		return "", fmt.Errorf("cpio: name %q leads out of the archive root", name)
	case n == trailer:
		return "", fmt.Errorf("cpio: name %q is reserved for the end of the archive", name)
	}
	return n, nil
}

// WriteEntry writes the header of e and, for a regular file, exactly e.Size
// bytes read from body. body is not read for other types and may be nil.
func (w *Writer) WriteEntry(e Entry, body io.Reader) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("cpio: write after Close")
	}
	name, err := CleanName(e.Name)
	if err != nil {
		return err
	}
	if w.names[name] {
		return fmt.Errorf("cpio: %s: name written twice", name)
	}
	// Errors in the entry itself leave the archive usable.
	h, data, err := w.header(name, e)
	if err != nil {
		return err
	}
	w.names[name] = true
	w.err = w.write(h, name, data, body)
	return w.err
}

// fields are the numeric header fields of one entry.
type fields struct {
	ino, mode, uid, gid, nlink uint32
	size                       int64
	rdevMajor, rdevMinor       uint32
}

// header checks e and returns its header fields and, for symbolic links,
// its data.
func (w *Writer) header(name string, e Entry) (fields, string, error) {
	if e.HardLink != "" {
		target, err := CleanName(e.HardLink)
		if err != nil {
			return fields{}, "", fmt.Errorf("cpio: %s: hard link: %w", name, err)
		}
		in, ok := w.files[target]
		if !ok {
			return fields{}, "", fmt.Errorf("cpio: %s: hard link to %s, which is not an earlier regular file", name, target)
		}
		if in.names >= in.nlink {
			return fields{}, "", fmt.Errorf("cpio: %s: hard link to %s, written with NLink %d, would be name %d", name, target, in.nlink, in.names+1)
		}
		in.names++
		return fields{ino: in.ino, mode: in.mode, uid: in.uid, gid: in.gid, nlink: in.nlink}, "", nil
	}
	if e.Mode&^(TypeMask|0o7777) != 0 {
		return fields{}, "", fmt.Errorf("cpio: %s: mode %#o has unknown bits", name, e.Mode)
	}
	f := fields{mode: e.Mode, uid: e.UID, gid: e.GID, nlink: 1}
	typ := e.Mode & TypeMask
	if typ != TypeRegular && e.Size != 0 {
		return fields{}, "", fmt.Errorf("cpio: %s: size %d given for a file that is not regular", name, e.Size)
	}
	if typ != TypeSymlink && e.Linkname != "" {
		return fields{}, "", fmt.Errorf("cpio: %s: link target given for a file that is not a symbolic link", name)
	}
	if typ != TypeChar && typ != TypeBlock && (e.DevMajor != 0 || e.DevMinor != 0) {
		return fields{}, "", fmt.Errorf("cpio: %s: device numbers given for a file that is not a device", name)
	}
	var data string
	switch typ {
	case TypeRegular:
		if e.Size < 0 || e.Size > math.MaxUint32 {
			return fields{}, "", fmt.Errorf("cpio: %s: size %d does not fit the newc format (4 GiB - 1 at most)", name, e.Size)
		}
		f.size = e.Size
		f.nlink = max(e.NLink, 1)
	case TypeDir:
		f.nlink = 2
	case TypeSymlink:
		if e.Linkname == "" {
			return fields{}, "", fmt.Errorf("cpio: %s: symbolic link without a target", name)
		}
		data = e.Linkname
		f.size = int64(len(data))
	case TypeChar, TypeBlock:
		f.rdevMajor, f.rdevMinor = e.DevMajor, e.DevMinor
	case TypeFIFO, TypeSocket:
	default:
		return fields{}, "", fmt.Errorf("cpio: %s: mode %#o has no file type", name, e.Mode)
	}
	if typ != TypeRegular && e.NLink > 1 {
		return fields{}, "", fmt.Errorf("cpio: %s: NLink %d given for a file that is not regular", name, e.NLink)
	}
	w.ino++
	f.ino = w.ino
	if typ == TypeRegular {
		w.files[name] = &inode{ino: f.ino, mode: f.mode, uid: f.uid, gid: f.gid, nlink: f.nlink, names: 1}
	}
	return f, data, nil
}

func (w *Writer) write(f fields, name, data string, body io.Reader) error {
	h := w.hdr[:]
	copy(h, magic)
	for i, v := range []uint32{
		f.ino, f.mode, f.uid, f.gid, f.nlink, uint32(w.mtime), uint32(f.size),
		0, 0, // device of the containing file system
		f.rdevMajor, f.rdevMinor,
		uint32(len(name) + 1),
		0, // checksum, unused in newc
	} {
		putHex(h[6+8*i:], v)
	}
	if _, err := w.w.Write(h); err != nil {
		return fmt.Errorf("cpio: %s: %w", name, err)
	}
	// The name is NUL-terminated and padded so that header and name end on
	// a multiple of four bytes.
	if _, err := io.WriteString(w.w, name+"\x00"+pad(headerSize+len(name)+1)); err != nil {
		return fmt.Errorf("cpio: %s: %w", name, err)
	}
	switch {
	case data != "":
		if _, err := io.WriteString(w.w, data); err != nil {
			return fmt.Errorf("cpio: %s: %w", name, err)
		}
	case f.size > 0:
		if body == nil {
			return fmt.Errorf("cpio: %s: no contents for %d bytes", name, f.size)
		}
		n, err := io.CopyN(w.w, body, f.size)
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("cpio: %s: contents are %d bytes, header says %d", name, n, f.size)
		}
		if err != nil {
			return fmt.Errorf("cpio: %s: %w", name, err)
		}
	}
	if _, err := io.WriteString(w.w, pad(int(f.size))); err != nil {
		return fmt.Errorf("cpio: %s: %w", name, err)
	}
	return nil
}

// Close writes the trailer entry. It does not close the underlying writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return nil
	}
	w.closed = true
	w.err = w.write(fields{nlink: 1}, trailer, "", nil)
	return w.err
}

func putHex(b []byte, v uint32) {
	const digits = "0123456789abcdef"
	for i := 7; i >= 0; i-- {
		b[i] = digits[v&0xf]
		v >>= 4
	}
}

// pad returns the zero bytes that bring n up to a multiple of four.
func pad(n int) string {
	return "\x00\x00\x00"[:(4-n%4)%4]
}
