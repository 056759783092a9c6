//go:build linux

package vfs

import (
	"encoding/binary"
	"sort"
	"strings"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"
)

// doReaddir is Readdir of p9.File. The listing is taken at offset 0 and
// served from there, so that a directory changing between calls neither
// repeats nor skips entries; entry i's offset is i+1, where the next
// call starts.
func (f *file) doReaddir(offset uint64, count uint32) (p9.Dirents, error) {
	f.mu.Lock()
	opened, rel, m, ents := f.opened, f.rel, f.mem, f.dirents
	f.mu.Unlock()
	if !opened {
		return nil, unix.EBADF
	}
	if offset == 0 || ents == nil {
		var err error
		if ents, err = f.fs.list(rel, m); err != nil {
			return nil, err
		}
		if err := f.fs.chargeListing(ents); err != nil {
			return nil, err
		}
		f.mu.Lock()
		old := f.dirents
		f.dirents = ents
		f.mu.Unlock()
		f.fs.unchargeListing(old)
	}
	if offset >= uint64(len(ents)) {
		return nil, nil
	}
	var out p9.Dirents
	size := 0
	for _, d := range ents[offset:] {
		// qid 13, offset 8, type 1, name 2+len.
		size += 24 + len(d.Name)
		if size > int(count) {
			break
		}
		out = append(out, d)
	}
	return out, nil
}

// list returns what the guest sees in the directory rel (or the opened
// in-memory directory m): ".", "..", the host's entries that are
// neither hidden nor in memory, and the in-memory entries.
func (fs *fsys) list(rel string, m *memNode) (p9.Dirents, error) {
	self, err := fs.lookup(rel)
	if err != nil {
		return nil, err
	}
	if !self.isDir() {
		return nil, unix.ENOTDIR
	}
	parentRel, _ := splitRel(rel)
	parent := self
	if rel != "" {
		if parent, err = fs.lookup(parentRel); err != nil {
			parent = self
		}
	}
	out := p9.Dirents{
		{QID: fs.qid(&self), Type: unix.DT_DIR, Name: "."},
		{QID: fs.qid(&parent), Type: unix.DT_DIR, Name: ".."},
	}
	// A dirent's type is Linux's d_type (DT_DIR, DT_REG...): the
	// kernel's client hands it to readdir(3) as it is, and git, find and
	// the like trust it. (The library's type is the QID's, which is not.)
	add := func(name string, q p9.QID, dtype uint8) error {
		if len(out) >= fs.lim.DirEntries {
			return unix.EOVERFLOW
		}
		out = append(out, p9.Dirent{QID: q, Type: p9.QIDType(dtype), Name: name})
		return nil
	}
	if m == nil && self.mem != nil {
		m = self.mem
	}
	if m != nil {
		fs.mem.mu.Lock()
		names := make([]string, 0, len(m.kids))
		for name := range m.kids {
			names = append(names, name)
		}
		sort.Strings(names)
		var qids []p9.QID
		var dtypes []uint8
		for _, name := range names {
			k := m.kids[name]
			if fs.rules.place(joinRel(rel, name)).hidden {
				continue
			}
			qids = append(qids, p9.QID{Type: p9.FileMode(k.ftype).QIDType(), Path: memIDBit | k.id})
			dtypes = append(dtypes, memDType(k.ftype))
		}
		fs.mem.mu.Unlock()
		i := 0
		for _, name := range names {
			if fs.rules.place(joinRel(rel, name)).hidden {
				continue
			}
			if err := add(name, qids[i], dtypes[i]); err != nil {
				return nil, err
			}
			i++
		}
		return fs.number(out), nil
	}
	err = fs.hostEntries(rel, func(name string, ino uint64, dtype uint8) error {
		pl := fs.rules.place(joinRel(rel, name))
		if pl.hidden || pl.inMem {
			return nil
		}
		return add(name, p9.QID{Type: dtypeQID(dtype), Path: ino &^ memIDBit}, dtype)
	})
	if err != nil {
		return nil, err
	}
	fs.mem.mu.Lock()
	roots := fs.mem.rootsIn(rel)
	type memEnt struct {
		name  string
		q     p9.QID
		dtype uint8
	}
	var mems []memEnt
	for name, k := range roots {
		mems = append(mems, memEnt{name, p9.QID{Type: p9.FileMode(k.ftype).QIDType(), Path: memIDBit | k.id}, memDType(k.ftype)})
	}
	fs.mem.mu.Unlock()
	sort.Slice(mems, func(i, j int) bool { return mems[i].name < mems[j].name })
	for _, e := range mems {
		if fs.rules.place(joinRel(rel, e.name)).hidden {
			continue
		}
		if err := add(e.name, e.q, e.dtype); err != nil {
			return nil, err
		}
	}
	return fs.number(out), nil
}

func (fs *fsys) number(ds p9.Dirents) p9.Dirents {
	for i := range ds {
		ds[i].Offset = uint64(i + 1)
	}
	return ds
}

// memDType is the d_type of an in-memory node: S_IFMT's bits shifted,
// as Linux defines DT_*.
func memDType(ftype uint32) uint8 { return uint8(ftype >> 12) }

func dtypeQID(t uint8) p9.QIDType {
	switch t {
	case unix.DT_DIR:
		return p9.TypeDir
	case unix.DT_LNK:
		return p9.TypeSymlink
	}
	return p9.TypeRegular
}

// hostEntries calls fn with each entry of the host directory rel, in
// the order the host lists them, without "." and "..".
func (fs *fsys) hostEntries(rel string, fn func(name string, ino uint64, dtype uint8) error) error {
	var fd int
	var err error
	if rel == "" {
		fd, err = unix.Openat(fs.root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	} else {
		fd, err = unix.Openat2(fs.root, rel, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: resolveFlags,
		})
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		for b := buf[:n]; len(b) >= 19; {
			// struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name.
			ino := binary.NativeEndian.Uint64(b[0:8])
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return unix.EIO
			}
			dtype := b[18]
			name := b[19:reclen]
			if i := strings.IndexByte(string(name), 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if s := string(name); s != "." && s != ".." {
				if err := fn(s, ino, dtype); err != nil {
					return err
				}
			}
		}
	}
}

// samePlaces checks that renaming the directory src to the path to
// leaves every path under it in the same place: not hidden then visible
// or the reverse, not read-only then writable or the reverse, not
// between host and memory, not moving what leads git to a repository
// nor anything into or out of a git directory (place.pinned, noLinks).
// It looks at what the host really holds, hidden files included, and at
// most Limits.RenameScan entries; a larger tree is refused with EXDEV,
// which tools answer by moving file by file.
func (fs *fsys) samePlaces(src node, to string) error {
	from := src.rel
	budget := fs.lim.RenameScan
	same := func(sub string) error {
		budget--
		if budget < 0 {
			return unix.EXDEV
		}
		a, b := fs.rules.place(joinRel(from, sub)), fs.rules.place(joinRel(to, sub))
		switch {
		case a.hidden != b.hidden:
			return unix.EACCES
		case a.writable != b.writable, a.pinned != b.pinned, a.noLinks != b.noLinks:
			return unix.EROFS
		case a.inMem != b.inMem:
			return unix.EXDEV
		}
		return nil
	}
	if src.mem != nil {
		fs.mem.mu.Lock()
		defer fs.mem.mu.Unlock()
		var walk func(n *memNode, sub string) error
		walk = func(n *memNode, sub string) error {
			for name, k := range n.kids {
				s := joinRel(sub, name)
				if err := same(s); err != nil {
					return err
				}
				if k.isDir() {
					if err := walk(k, s); err != nil {
						return err
					}
				}
			}
			return nil
		}
		return walk(src.mem, "")
	}
	// In-memory trees hanging in the host directories moved along.
	fs.mem.mu.Lock()
	for dir, kids := range fs.mem.roots {
		if dir != from && !strings.HasPrefix(dir, from+"/") {
			continue
		}
		for name := range kids {
			if err := same(joinRel(strings.TrimPrefix(strings.TrimPrefix(dir, from), "/"), name)); err != nil {
				fs.mem.mu.Unlock()
				return err
			}
		}
	}
	fs.mem.mu.Unlock()
	stack := []string{""}
	for len(stack) > 0 {
		sub := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		err := fs.hostEntries(joinRel(from, sub), func(name string, _ uint64, dtype uint8) error {
			s := joinRel(sub, name)
			if err := same(s); err != nil {
				return err
			}
			if dtype == unix.DT_DIR || dtype == unix.DT_UNKNOWN {
				stack = append(stack, s)
			}
			return nil
		})
		if err != nil && err != unix.ENOTDIR {
			return err
		}
	}
	return nil
}

// moveMemRoots re-keys the in-memory trees that hang under a host
// directory renamed from from to to.
func (fs *fsys) moveMemRoots(from, to string) {
	fs.mem.mu.Lock()
	defer fs.mem.mu.Unlock()
	moved := map[string]map[string]*memNode{}
	for dir, kids := range fs.mem.roots {
		if dir == from || strings.HasPrefix(dir, from+"/") {
			moved[to+dir[len(from):]] = kids
			delete(fs.mem.roots, dir)
		}
	}
	for dir, kids := range moved {
		fs.mem.roots[dir] = kids
	}
}

// listingCost is what a listing counts against Limits.ListingBytes.
func listingCost(ds p9.Dirents) int64 {
	n := int64(0)
	for _, d := range ds {
		n += 64 + int64(len(d.Name))
	}
	return n
}

func (fs *fsys) chargeListing(ds p9.Dirents) error {
	c := listingCost(ds)
	if fs.listing.Add(c) > fs.lim.ListingBytes {
		fs.listing.Add(-c)
		return unix.ENOMEM
	}
	return nil
}

func (fs *fsys) unchargeListing(ds p9.Dirents) {
	if ds != nil {
		fs.listing.Add(-listingCost(ds))
	}
}
