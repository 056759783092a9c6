//go:build linux

package vfs

import (
	"path"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// memNodeCost is what each in-memory node counts against the tmpfs
// limit besides its data and name: a hostile guest making empty files
// must run out of room too.
const memNodeCost = 256

// memIDBit marks the QID paths of in-memory files, so that they never
// equal a host inode number.
const memIDBit = 1 << 63

// memNode is one file, directory or symbolic link of the tmpfs paths.
type memNode struct {
	id     uint64
	ftype  uint32 // unix.S_IF*, fixed at creation
	mode   uint32 // ftype and the permission bits
	data   []byte
	target string
	kids   map[string]*memNode
	nlink  uint32
	// opens is how many open files hold the node (file.mem): one
	// unlinked while open stays counted against the limit until the
	// last of them closes.
	opens int
	atime time.Time
	mtime time.Time
	ctime time.Time
}

func (n *memNode) isDir() bool { return n.ftype == unix.S_IFDIR }

// memStore holds every tmpfs path of one mount: trees rooted where a
// tmpfs pattern first matches, indexed by the root's parent directory so
// that listing a host directory finds the trees that appear in it.
type memStore struct {
	mu    sync.Mutex
	roots map[string]map[string]*memNode
	used  int64
	limit int64
	next  uint64
}

func newMemStore(limit int64) *memStore {
	return &memStore{roots: map[string]map[string]*memNode{}, limit: limit}
}

// charge counts n more bytes against the limit (n may be negative).
// Callers hold mu.
func (m *memStore) charge(n int64) error {
	if n > 0 && m.used+n > m.limit {
		return unix.ENOSPC
	}
	m.used += n
	return nil
}

// newNode makes a node and charges it with its name. Callers hold mu.
func (m *memStore) newNode(mode uint32, name string) (*memNode, error) {
	if err := m.charge(memNodeCost + int64(len(name))); err != nil {
		return nil, err
	}
	m.next++
	now := time.Now()
	n := &memNode{id: m.next, ftype: mode & unix.S_IFMT, mode: mode, nlink: 1, atime: now, mtime: now, ctime: now}
	if n.isDir() {
		n.kids = map[string]*memNode{}
		n.nlink = 2
	}
	return n, nil
}

// lookup finds the node at rel, whose tree is rooted at root. Callers
// hold mu.
func (m *memStore) lookup(root, rel string) (*memNode, error) {
	dir, name := splitRel(root)
	n := m.roots[dir][name]
	if n == nil {
		return nil, unix.ENOENT
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(rel, root), "/")
	if rest == "" {
		return n, nil
	}
	for _, c := range strings.Split(rest, "/") {
		if !n.isDir() {
			return nil, unix.ENOTDIR
		}
		if n = n.kids[c]; n == nil {
			return nil, unix.ENOENT
		}
	}
	return n, nil
}

// dirOf returns the directory that holds (or would hold) rel: the
// roots' index for a root, the parent node otherwise. Callers hold mu.
func (m *memStore) dirOf(root, rel string, create bool) (map[string]*memNode, *memNode, error) {
	if rel == root {
		dir, _ := splitRel(root)
		kids := m.roots[dir]
		if kids == nil && create {
			kids = map[string]*memNode{}
			m.roots[dir] = kids
		}
		return kids, nil, nil
	}
	parent, err := m.lookup(root, path.Dir(rel))
	if err != nil {
		return nil, nil, err
	}
	if !parent.isDir() {
		return nil, nil, unix.ENOTDIR
	}
	return parent.kids, parent, nil
}

// add puts n at rel (root being its tree's root), failing if something
// is there. Callers hold mu.
func (m *memStore) add(root, rel string, n *memNode) error {
	kids, parent, err := m.dirOf(root, rel, true)
	if err != nil {
		return err
	}
	_, name := splitRel(rel)
	if kids[name] != nil {
		return unix.EEXIST
	}
	kids[name] = n
	if parent != nil {
		parent.mtime, parent.ctime = time.Now(), time.Now()
		if n.isDir() {
			parent.nlink++
		}
	}
	return nil
}

// remove takes rel's node out of its directory, refusing a directory
// when !dirOK, a directory that is not empty, and anything else when
// !fileOK. Callers hold mu.
func (m *memStore) remove(root, rel string, dirOK, fileOK bool) (*memNode, error) {
	n, err := m.lookup(root, rel)
	if err != nil {
		return nil, err
	}
	switch {
	case n.isDir() && !dirOK:
		return nil, unix.EISDIR
	case !n.isDir() && !fileOK:
		return nil, unix.ENOTDIR
	case n.isDir() && len(n.kids) > 0:
		return nil, unix.ENOTEMPTY
	}
	return m.detach(root, rel)
}

// detach takes rel's node out of its directory. Callers hold mu.
func (m *memStore) detach(root, rel string) (*memNode, error) {
	kids, parent, err := m.dirOf(root, rel, false)
	if err != nil {
		return nil, err
	}
	_, name := splitRel(rel)
	n := kids[name]
	if n == nil {
		return nil, unix.ENOENT
	}
	delete(kids, name)
	if parent == nil && len(kids) == 0 {
		dir, _ := splitRel(rel)
		delete(m.roots, dir)
	}
	if parent != nil {
		parent.mtime, parent.ctime = time.Now(), time.Now()
		if n.isDir() {
			parent.nlink--
		}
	}
	return n, nil
}

// release uncharges a node that left the tree, once no name and no
// open file holds it. Callers hold mu.
func (m *memStore) release(n *memNode, name string) {
	m.used -= int64(len(name))
	if n.nlink > 0 && !n.isDir() {
		n.nlink--
	}
	if n.isDir() || n.nlink == 0 && n.opens == 0 {
		m.uncharge(n)
	}
}

// uncharge gives back what a node that is gone counted. Callers hold mu.
func (m *memStore) uncharge(n *memNode) {
	m.used -= memNodeCost + int64(len(n.data)+len(n.target))
}

// opened counts an open file holding n. Callers hold mu.
func (m *memStore) opened(n *memNode) { n.opens++ }

// closed counts an open file of n closing, and uncharges a file no name
// holds any more once the last one has. Callers hold mu.
func (m *memStore) closed(n *memNode) {
	n.opens--
	if n.opens == 0 && n.nlink == 0 && !n.isDir() {
		m.uncharge(n)
	}
}

// gone says an open file's node has been released: no name and no open
// file holds it, so that writing to it would count bytes nothing gives
// back. Callers hold mu.
func (n *memNode) gone() bool { return n.nlink == 0 && n.opens == 0 && !n.isDir() }

// rootsIn returns the trees rooted directly in the directory dir.
// Callers hold mu.
func (m *memStore) rootsIn(dir string) map[string]*memNode {
	return m.roots[dir]
}

// splitRel splits a relative path into its directory ("" at the root)
// and last name.
func splitRel(rel string) (string, string) {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return "", rel
	}
	return rel[:i], rel[i+1:]
}

// joinRel joins a relative directory and a name.
func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}
