//go:build linux

package vfs

import (
	"strings"
	"time"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"
)

// memMake makes an in-memory file, directory or link at rel.
func (fs *fsys) memMake(rel string, pl place, mode uint32, target string) (*memNode, error) {
	if rel == pl.memRoot {
		// A tree's root hangs in a host directory, which must be there.
		dir, _ := splitRel(rel)
		pn, err := fs.lookup(dir)
		if err != nil {
			return nil, err
		}
		if !pn.isDir() {
			return nil, unix.ENOTDIR
		}
	}
	_, name := splitRel(rel)
	fs.mem.mu.Lock()
	defer fs.mem.mu.Unlock()
	n, err := fs.mem.newNode(mode, name)
	if err != nil {
		return nil, err
	}
	if target != "" {
		if err := fs.mem.charge(int64(len(target))); err != nil {
			fs.mem.release(n, name)
			return nil, err
		}
		n.target = target
	}
	if err := fs.mem.add(pl.memRoot, rel, n); err != nil {
		fs.mem.release(n, name)
		return nil, err
	}
	return n, nil
}

// memLink gives an in-memory file a second name.
func (fs *fsys) memLink(t node, rel string, pl place) error {
	_, name := splitRel(rel)
	fs.mem.mu.Lock()
	defer fs.mem.mu.Unlock()
	kids, parent, err := fs.mem.dirOf(pl.memRoot, rel, true)
	if err != nil {
		return err
	}
	if kids[name] != nil {
		return unix.EEXIST
	}
	if err := fs.mem.charge(int64(len(name))); err != nil {
		return err
	}
	kids[name] = t.mem
	t.mem.nlink++
	t.mem.ctime = time.Now()
	if parent != nil {
		parent.mtime = time.Now()
	}
	return nil
}

// memRename moves an in-memory node to another in-memory path.
func (fs *fsys) memRename(src node, to string, dst place) error {
	from := src.rel
	if to == from {
		return nil
	}
	if strings.HasPrefix(to, from+"/") {
		return unix.EINVAL
	}
	if dst.memRoot == to {
		dir, _ := splitRel(to)
		pn, err := fs.lookup(dir)
		if err != nil {
			return err
		}
		if !pn.isDir() {
			return unix.ENOTDIR
		}
	}
	_, oldName := splitRel(from)
	_, newName := splitRel(to)
	fs.mem.mu.Lock()
	defer fs.mem.mu.Unlock()
	kids, _, err := fs.mem.dirOf(dst.memRoot, to, true)
	if err != nil {
		return err
	}
	if old := kids[newName]; old != nil {
		if old == src.mem {
			return nil
		}
		switch {
		case src.mem.isDir() && !old.isDir():
			return unix.ENOTDIR
		case !src.mem.isDir() && old.isDir():
			return unix.EISDIR
		}
		gone, err := fs.mem.remove(dst.memRoot, to, true, true)
		if err != nil {
			return err
		}
		fs.mem.release(gone, newName)
	}
	n, err := fs.mem.detach(src.pl.memRoot, from)
	if err != nil {
		return err
	}
	fs.mem.used += int64(len(newName) - len(oldName))
	if err := fs.mem.add(dst.memRoot, to, n); err != nil {
		// Cannot happen after the checks above; put it back.
		fs.mem.add(src.pl.memRoot, from, n)
		return err
	}
	n.ctime = time.Now()
	return nil
}

// memSetAttr changes an in-memory node.
func (fs *fsys) memSetAttr(n node, valid p9.SetAttrMask, attr p9.SetAttr) error {
	fs.mem.mu.Lock()
	defer fs.mem.mu.Unlock()
	m := n.mem
	now := time.Now()
	if valid.Size {
		if m.ftype != unix.S_IFREG {
			return unix.EINVAL
		}
		size := int64(attr.Size)
		if size < 0 || size > 1<<50 {
			return unix.EFBIG
		}
		if grow := size - int64(len(m.data)); grow > 0 {
			if err := fs.mem.charge(grow); err != nil {
				return err
			}
			m.data = append(m.data, make([]byte, grow)...)
		} else {
			fs.mem.used += grow
			m.data = m.data[:size:size]
		}
		m.mtime = now
	}
	if valid.Permissions {
		m.mode = m.ftype | guestBits(attr.Permissions)
	}
	if valid.ATime {
		m.atime = memTime(valid.ATimeNotSystemTime, attr.ATimeSeconds, attr.ATimeNanoSeconds, now)
	}
	if valid.MTime {
		m.mtime = memTime(valid.MTimeNotSystemTime, attr.MTimeSeconds, attr.MTimeNanoSeconds, now)
	}
	m.ctime = now
	return nil
}

func memTime(given bool, sec, nsec uint64, now time.Time) time.Time {
	if !given {
		return now
	}
	return time.Unix(int64(sec), int64(nsec))
}
