//go:build linux

package vfs

import (
	"errors"
	"syscall"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
)

// The p9.File methods below hand the file system's errors to the 9P
// library as its own errno type. Given a system errno, the library maps
// it through os.ErrPermission, os.ErrExist and the like, which turns
// EPERM into EACCES and ENOTEMPTY into EEXIST; its own type passes
// unchanged, so the guest sees the errno the host chose.

func wireErr(err error) error {
	var e syscall.Errno
	if errors.As(err, &e) {
		return linux.Errno(e)
	}
	return err
}

// Walk implements p9.File.
func (f *file) Walk(names []string) ([]p9.QID, p9.File, error) {
	q, nf, err := f.doWalk(names)
	return q, nf, wireErr(err)
}

// WalkGetAttr implements p9.File.
func (f *file) WalkGetAttr(names []string) ([]p9.QID, p9.File, p9.AttrMask, p9.Attr, error) {
	q, nf, m, a, err := f.doWalkGetAttr(names)
	return q, nf, m, a, wireErr(err)
}

// StatFS implements p9.File.
func (f *file) StatFS() (p9.FSStat, error) {
	s, err := f.doStatFS()
	return s, wireErr(err)
}

// GetAttr implements p9.File.
func (f *file) GetAttr(req p9.AttrMask) (p9.QID, p9.AttrMask, p9.Attr, error) {
	q, m, a, err := f.doGetAttr(req)
	return q, m, a, wireErr(err)
}

// SetAttr implements p9.File.
func (f *file) SetAttr(valid p9.SetAttrMask, attr p9.SetAttr) error {
	return wireErr(f.doSetAttr(valid, attr))
}

// Open implements p9.File.
func (f *file) Open(mode p9.OpenFlags) (p9.QID, uint32, error) {
	q, n, err := f.doOpen(mode)
	return q, n, wireErr(err)
}

// ReadAt implements p9.File.
func (f *file) ReadAt(p []byte, offset int64) (int, error) {
	n, err := f.doReadAt(p, offset)
	return n, wireErr(err)
}

// WriteAt implements p9.File.
func (f *file) WriteAt(p []byte, offset int64) (int, error) {
	n, err := f.doWriteAt(p, offset)
	return n, wireErr(err)
}

// FSync implements p9.File.
func (f *file) FSync() error { return wireErr(f.doFSync()) }

// Create implements p9.File.
func (f *file) Create(name string, flags p9.OpenFlags, perm p9.FileMode, uid p9.UID, gid p9.GID) (p9.File, p9.QID, uint32, error) {
	nf, q, n, err := f.doCreate(name, flags, perm, uid, gid)
	if err != nil {
		return nil, q, n, wireErr(err)
	}
	return nf, q, n, nil
}

// Mkdir implements p9.File.
func (f *file) Mkdir(name string, perm p9.FileMode, uid p9.UID, gid p9.GID) (p9.QID, error) {
	q, err := f.doMkdir(name, perm, uid, gid)
	return q, wireErr(err)
}

// Symlink implements p9.File.
func (f *file) Symlink(target, name string, uid p9.UID, gid p9.GID) (p9.QID, error) {
	q, err := f.doSymlink(target, name, uid, gid)
	return q, wireErr(err)
}

// Link implements p9.File.
func (f *file) Link(target p9.File, name string) error { return wireErr(f.doLink(target, name)) }

// RenameAt implements p9.File.
func (f *file) RenameAt(oldName string, newDir p9.File, newName string) error {
	return wireErr(f.doRenameAt(oldName, newDir, newName))
}

// UnlinkAt implements p9.File.
func (f *file) UnlinkAt(name string, flags uint32) error { return wireErr(f.doUnlinkAt(name, flags)) }

// Readlink implements p9.File.
func (f *file) Readlink() (string, error) {
	s, err := f.doReadlink()
	return s, wireErr(err)
}

// Readdir implements p9.File.
func (f *file) Readdir(offset uint64, count uint32) (p9.Dirents, error) {
	d, err := f.doReaddir(offset, count)
	return d, wireErr(err)
}
