package layers

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// Entry describes one path of a tree.
type Entry struct {
	// Path is absolute and clean: "/", "/usr/bin/env".
	Path string
	// Type is a tar type flag: tar.TypeReg, TypeDir, TypeSymlink,
	// TypeChar, TypeBlock or TypeFifo. Add also takes tar.TypeLink, a hard
	// link to the path in Linkname.
	Type byte
	// Mode holds the permission bits with setuid, setgid and sticky
	// (07777).
	Mode     int64
	UID, GID int
	// Linkname is a symbolic link's target, kept as written, or a hard
	// link's target path (Add only).
	Linkname           string
	Devmajor, Devminor int64
	// Xattrs are extended attributes by full name ("security.capability").
	Xattrs map[string]string
	// Size is a regular file's length.
	Size int64
}

// inode is what paths point at; hard-linked paths share one.
type inode struct {
	typ                byte
	mode               int64
	uid, gid           int
	linkname           string
	devmajor, devminor int64
	xattrs             map[string]string
	size, off          int64 // regular files: length and offset in the spill file
}

func (n *inode) entry(p string) Entry {
	e := Entry{
		Path: "/" + p, Type: n.typ, Mode: n.mode, UID: n.uid, GID: n.gid,
		Linkname: n.linkname, Devmajor: n.devmajor, Devminor: n.devminor, Size: n.size,
	}
	if len(n.xattrs) > 0 {
		e.Xattrs = make(map[string]string, len(n.xattrs))
		for k, v := range n.xattrs {
			e.Xattrs[k] = v
		}
	}
	return e
}

// Tree is a file tree indexed in memory with file contents in a spill
// file. A Tree is not safe for concurrent use.
type Tree struct {
	// nodes maps paths, stored relative without a leading slash (the
	// root is ""), to inodes.
	nodes map[string]*inode
	// children maps a directory to the names directly in it.
	children map[string]map[string]struct{}
	spill    *os.File
	spillPth string // non-empty while the spill file still has a name
	end      int64  // bytes written to spill
	limits   Limits
	entries  int // entries taken in, counted against limits.Entries
}

// Limits bound what a tree takes in, so that an archive that expands
// without bound (a few kilobytes of compressed zeros, millions of empty
// entries) stops with an error instead of filling the disk or memory.
// Zero means no limit.
type Limits struct {
	// Bytes bounds the regular file content written to the spill file,
	// counting files later replaced or removed.
	Bytes int64
	// Entries bounds the entries taken in: every Add, and every entry of
	// every layer Apply reads (whiteouts included).
	Entries int
}

// LimitError says a tree reached one of its Limits.
type LimitError struct {
	// Entries is set when the entry limit was reached, and the byte limit
	// otherwise.
	Entries bool
	Limit   int64
}

func (e *LimitError) Error() string {
	if e.Entries {
		return fmt.Sprintf("more than %d entries", e.Limit)
	}
	return fmt.Sprintf("more than %d bytes of file content", e.Limit)
}

// SetLimits bounds what the tree takes in from now on; what it already
// holds counts.
func (t *Tree) SetLimits(l Limits) { t.limits = l }

// countEntry counts one entry taken in against the entry limit.
func (t *Tree) countEntry() error {
	t.entries++
	if t.limits.Entries > 0 && t.entries > t.limits.Entries {
		return &LimitError{Entries: true, Limit: int64(t.limits.Entries)}
	}
	return nil
}

// NewTree returns a tree holding only the root directory (mode 0755, owned
// by 0:0). File contents are spilled to a temporary file in dir, or in the
// default temporary directory when dir is empty.
func NewTree(dir string) (*Tree, error) {
	f, err := os.CreateTemp(dir, "sbx-layers-*")
	if err != nil {
		return nil, fmt.Errorf("layers: spill file: %w", err)
	}
	t := &Tree{
		nodes:    map[string]*inode{"": {typ: tar.TypeDir, mode: 0o755}},
		children: map[string]map[string]struct{}{},
		spill:    f,
		spillPth: f.Name(),
	}
	// Unlinked at once where the system allows it, so that nothing stays
	// behind even if the process dies; Close removes it otherwise.
	if os.Remove(f.Name()) == nil {
		t.spillPth = ""
	}
	return t, nil
}

// Close releases the spill file. The tree cannot be written after.
func (t *Tree) Close() error {
	if t.spill == nil {
		return nil
	}
	err := t.spill.Close()
	if t.spillPth != "" {
		if rerr := os.Remove(t.spillPth); err == nil {
			err = rerr
		}
	}
	t.spill = nil
	return err
}

// Len returns the number of paths in the tree, the root included.
func (t *Tree) Len() int { return len(t.nodes) }

// Lookup returns the entry at the absolute path p. Hard-linked paths are
// each reported as what they share (a regular file, say).
func (t *Tree) Lookup(p string) (Entry, bool) {
	rel, err := absPath(p)
	if err != nil {
		return Entry{}, false
	}
	n, ok := t.nodes[rel]
	if !ok {
		return Entry{}, false
	}
	return n.entry(rel), true
}

// Open returns the content of the regular file at the absolute path p.
func (t *Tree) Open(p string) (io.Reader, error) {
	rel, err := absPath(p)
	if err != nil {
		return nil, err
	}
	n, ok := t.nodes[rel]
	switch {
	case !ok:
		return nil, fmt.Errorf("%s: no such path in the tree", p)
	case n.typ != tar.TypeReg:
		return nil, fmt.Errorf("%s: not a regular file", p)
	case t.spill == nil:
		return nil, errors.New("layers: tree is closed")
	}
	return io.NewSectionReader(t.spill, n.off, n.size), nil
}

// Paths returns every path of the tree, absolute, in the order WriteTar
// writes them.
func (t *Tree) Paths() []string {
	rels := t.sorted()
	out := make([]string, len(rels))
	for i, r := range rels {
		out[i] = "/" + r
	}
	return out
}

// Add places e at e.Path, replacing what is there (a directory replaced
// by a non-directory takes its contents with it; a directory replacing a
// directory keeps them). Missing parent directories are created with mode
// 0755, owned by 0:0; a parent that exists but is not a directory is an
// error, since links are never followed. For a regular file, content
// supplies exactly e.Size bytes. For tar.TypeLink, e.Linkname is the
// absolute path of an existing non-directory, which e.Path then shares.
func (t *Tree) Add(e Entry, content io.Reader) error {
	rel, err := absPath(e.Path)
	if err != nil {
		return err
	}
	if err := t.countEntry(); err != nil {
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	if e.Type == tar.TypeLink {
		target, err := absPath(e.Linkname)
		if err != nil {
			return fmt.Errorf("%s: hard link target: %w", e.Path, err)
		}
		return t.link(rel, target)
	}
	n, err := t.newInode(e.Path, e, content)
	if err != nil {
		return err
	}
	return t.put(rel, n)
}

// Remove deletes the path p and everything below it. Removing a path that
// is not there is not an error; removing the root is.
func (t *Tree) Remove(p string) error {
	rel, err := absPath(p)
	if err != nil {
		return err
	}
	if rel == "" {
		return errors.New("the root directory cannot be removed")
	}
	t.remove(rel)
	return nil
}

// newInode checks e and spills its content. what names it in errors.
func (t *Tree) newInode(what string, e Entry, content io.Reader) (*inode, error) {
	n := &inode{
		typ: e.Type, mode: e.Mode & 0o7777, uid: e.UID, gid: e.GID,
		devmajor: e.Devmajor, devminor: e.Devminor,
	}
	if e.UID < 0 || e.GID < 0 {
		return nil, fmt.Errorf("%s: negative uid or gid", what)
	}
	if len(e.Xattrs) > 0 {
		n.xattrs = make(map[string]string, len(e.Xattrs))
		for k, v := range e.Xattrs {
			n.xattrs[k] = v
		}
	}
	switch e.Type {
	case tar.TypeReg:
		if e.Size < 0 {
			return nil, fmt.Errorf("%s: negative size", what)
		}
		if t.spill == nil {
			return nil, errors.New("layers: tree is closed")
		}
		if t.limits.Bytes > 0 && e.Size > t.limits.Bytes-t.end {
			// Refused on the header's word, before a byte is written.
			return nil, fmt.Errorf("%s: %d bytes: %w", what, e.Size, &LimitError{Limit: t.limits.Bytes})
		}
		var src io.Reader = eofReader{}
		if content != nil {
			src = content
		}
		off := t.end
		w := io.NewOffsetWriter(t.spill, off)
		got, err := io.Copy(w, io.LimitReader(src, e.Size))
		t.end += got
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if got != e.Size {
			return nil, fmt.Errorf("%s: content is %d bytes, want %d", what, got, e.Size)
		}
		n.size, n.off = e.Size, off
	case tar.TypeSymlink:
		if e.Linkname == "" {
			return nil, fmt.Errorf("%s: symbolic link with an empty target", what)
		}
		n.linkname = e.Linkname
	case tar.TypeDir, tar.TypeFifo:
	case tar.TypeChar, tar.TypeBlock:
		if e.Devmajor < 0 || e.Devminor < 0 {
			return nil, fmt.Errorf("%s: negative device number", what)
		}
	default:
		return nil, fmt.Errorf("%s: unsupported entry type %q", what, e.Type)
	}
	if e.Type != tar.TypeChar && e.Type != tar.TypeBlock {
		n.devmajor, n.devminor = 0, 0
	}
	return n, nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// put places n at rel, creating missing parents.
func (t *Tree) put(rel string, n *inode) error {
	if rel == "" {
		if n.typ != tar.TypeDir {
			return errors.New("/: the root must be a directory")
		}
		t.nodes[""] = n
		return nil
	}
	if err := t.mkdirParents(rel); err != nil {
		return err
	}
	if old, ok := t.nodes[rel]; ok && !(old.typ == tar.TypeDir && n.typ == tar.TypeDir) {
		t.remove(rel)
	}
	t.nodes[rel] = n
	dir, name := split(rel)
	kids := t.children[dir]
	if kids == nil {
		kids = map[string]struct{}{}
		t.children[dir] = kids
	}
	kids[name] = struct{}{}
	return nil
}

// mkdirParents makes sure every parent of rel is a directory.
func (t *Tree) mkdirParents(rel string) error {
	dir, _ := split(rel)
	if dir == "" {
		return nil
	}
	if n, ok := t.nodes[dir]; ok {
		if n.typ != tar.TypeDir {
			return &parentError{path: rel, parent: dir, n: n}
		}
		return nil
	}
	return t.put(dir, &inode{typ: tar.TypeDir, mode: 0o755})
}

// parentError is an entry below a path that is not a directory.
type parentError struct {
	path, parent string
	n            *inode
}

func (e *parentError) Error() string {
	what := "a " + TypeName(e.n.typ)
	if e.n.typ == tar.TypeSymlink {
		what += " to " + e.n.linkname + ", which is not followed"
	}
	return fmt.Sprintf("/%s: parent /%s is %s, not a directory", e.path, e.parent, what)
}

// link makes rel share the inode at target.
func (t *Tree) link(rel, target string) error {
	n, ok := t.nodes[target]
	switch {
	case !ok:
		return fmt.Errorf("/%s: hard link target /%s does not exist", rel, target)
	case n.typ == tar.TypeDir:
		return fmt.Errorf("/%s: hard link target /%s is a directory", rel, target)
	case rel == target:
		return fmt.Errorf("/%s: hard link to itself", rel)
	}
	return t.put(rel, n)
}

// remove deletes rel and everything below it.
func (t *Tree) remove(rel string) {
	if _, ok := t.nodes[rel]; !ok {
		return
	}
	t.removeChildren(rel)
	delete(t.nodes, rel)
	dir, name := split(rel)
	delete(t.children[dir], name)
}

// removeChildren deletes everything below the directory rel.
func (t *Tree) removeChildren(rel string) {
	for name := range t.children[rel] {
		child := join(rel, name)
		t.removeChildren(child)
		delete(t.nodes, child)
	}
	delete(t.children, rel)
}

// sorted returns every path in canonical order: component by component,
// so that a directory's whole subtree follows it directly.
func (t *Tree) sorted() []string {
	out := make([]string, 0, len(t.nodes))
	for p := range t.nodes {
		out = append(out, p)
	}
	slices.SortFunc(out, comparePaths)
	return out
}

// comparePaths orders paths component by component: '/' sorts before
// every other byte.
func comparePaths(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		ca, cb := a[i], b[i]
		if ca == cb {
			continue
		}
		if ca == '/' {
			return -1
		}
		if cb == '/' {
			return 1
		}
		if ca < cb {
			return -1
		}
		return 1
	}
	return len(a) - len(b)
}

// WriteTar writes the tree to w as a canonical tar stream (see the
// package documentation). Every modification time is epoch, in seconds
// since 1970. The stream ends with the tar trailer.
func (t *Tree) WriteTar(w io.Writer, epoch int64) error {
	if t.spill == nil {
		return errors.New("layers: tree is closed")
	}
	tw := tar.NewWriter(w)
	mtime := time.Unix(epoch, 0).UTC()
	first := map[*inode]string{}
	for _, rel := range t.sorted() {
		n := t.nodes[rel]
		hdr := &tar.Header{
			Format:   tar.FormatPAX,
			Typeflag: n.typ,
			Name:     rel,
			Mode:     n.mode,
			Uid:      n.uid,
			Gid:      n.gid,
			ModTime:  mtime,
			Linkname: n.linkname,
			Devmajor: n.devmajor,
			Devminor: n.devminor,
		}
		switch {
		case rel == "":
			hdr.Name = "./"
		case n.typ == tar.TypeDir:
			hdr.Name += "/"
		}
		if len(n.xattrs) > 0 {
			hdr.PAXRecords = make(map[string]string, len(n.xattrs))
			for k, v := range n.xattrs {
				hdr.PAXRecords["SCHILY.xattr."+k] = v
			}
		}
		var body io.Reader
		if n.typ != tar.TypeDir {
			if target, ok := first[n]; ok {
				hdr.Typeflag = tar.TypeLink
				hdr.Linkname = target
			} else {
				first[n] = rel
				if n.typ == tar.TypeReg {
					hdr.Size = n.size
					body = io.NewSectionReader(t.spill, n.off, n.size)
				}
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("/%s: %w", rel, err)
		}
		if body != nil {
			if _, err := io.Copy(tw, body); err != nil {
				return fmt.Errorf("/%s: %w", rel, err)
			}
		}
	}
	return tw.Close()
}

// absPath turns an absolute path into the tree's relative form. The path
// must be clean, so that what a caller names is what is written.
func absPath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q is not absolute", p)
	}
	if path.Clean(p) != p {
		return "", fmt.Errorf("path %q is not clean (want %q)", p, path.Clean(p))
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	return strings.TrimPrefix(p, "/"), nil
}

func split(rel string) (dir, name string) {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return "", rel
	}
	return rel[:i], rel[i+1:]
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// TypeName names a tar entry type for messages ("symbolic link").
func TypeName(typ byte) string {
	switch typ {
	case tar.TypeReg:
		return "regular file"
	case tar.TypeDir:
		return "directory"
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "FIFO"
	}
	return fmt.Sprintf("entry of type %q", typ)
}
