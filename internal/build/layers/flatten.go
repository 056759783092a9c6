package layers

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Whiteout names, as the OCI image layer specification defines them.
const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// Flatten applies layers in order, lowest first, to a new tree whose
// contents spill to the default temporary directory. On error the tree is
// closed and the error names the layer and entry.
func Flatten(layers []Layer) (*Tree, error) {
	t, err := NewTree("")
	if err != nil {
		return nil, err
	}
	for _, l := range layers {
		if err := t.Apply(l); err != nil {
			t.Close()
			return nil, err
		}
	}
	return t, nil
}

// pending is an entry of a layer read but not yet placed.
type pending struct {
	rel    string
	n      *inode // nil for a hard link
	target string // a hard link's target
}

// Apply reads layer l and applies it on top of the tree: first its
// opaque-directory markers and whiteouts against what lower layers put in
// the tree, then its entries in path order, hard links last. The order of
// entries inside the layer therefore does not matter; of two entries for
// one path, the later in the layer wins.
func (t *Tree) Apply(l Layer) error {
	if err := checkMediaType(l.MediaType); err != nil {
		return fmt.Errorf("layer %s: %w", l.Name, err)
	}
	if l.Open == nil {
		return fmt.Errorf("layer %s: nothing to read", l.Name)
	}
	rc, err := l.Open()
	if err != nil {
		return fmt.Errorf("layer %s: %w", l.Name, err)
	}
	defer rc.Close()
	r, done, err := decompress(rc)
	if err != nil {
		return fmt.Errorf("layer %s: %w", l.Name, err)
	}
	defer done()

	var (
		ents      []pending
		opaque    []string
		whiteouts []string
	)
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("layer %s: %w", l.Name, err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if err := t.countEntry(); err != nil {
			return fmt.Errorf("layer %s: entry %q: %w", l.Name, hdr.Name, err)
		}
		rel, err := layerName(hdr.Name)
		if err != nil {
			return fmt.Errorf("layer %s: entry %q: %w", l.Name, hdr.Name, err)
		}
		dir, base := split(rel)
		switch {
		case base == whiteoutOpaque:
			opaque = append(opaque, dir)
			continue
		case strings.HasPrefix(base, whiteoutMeta):
			continue // other AUFS metadata (hard link stores) carries nothing to apply
		case strings.HasPrefix(base, whiteoutPrefix):
			name := base[len(whiteoutPrefix):]
			if name == "" || name == "." || name == ".." {
				return fmt.Errorf("layer %s: entry %q: whiteout of nothing", l.Name, hdr.Name)
			}
			whiteouts = append(whiteouts, join(dir, name))
			continue
		}
		if hdr.Typeflag == tar.TypeLink {
			target, err := layerName(hdr.Linkname)
			if err != nil {
				return fmt.Errorf("layer %s: entry %q: hard link target %q: %w", l.Name, hdr.Name, hdr.Linkname, err)
			}
			ents = append(ents, pending{rel: rel, target: target})
			continue
		}
		e, err := headerEntry(hdr)
		if err != nil {
			return fmt.Errorf("layer %s: entry %q: %w", l.Name, hdr.Name, err)
		}
		n, err := t.newInode("/"+rel, e, tr)
		if err != nil {
			return fmt.Errorf("layer %s: entry %q: %w", l.Name, hdr.Name, err)
		}
		if rel == "" && n.typ != tar.TypeDir {
			return fmt.Errorf("layer %s: entry %q: the root must be a directory", l.Name, hdr.Name)
		}
		ents = append(ents, pending{rel: rel, n: n})
	}

	for _, d := range opaque {
		if n, ok := t.nodes[d]; ok && n.typ == tar.TypeDir {
			t.removeChildren(d)
		}
	}
	for _, w := range whiteouts {
		t.remove(w)
	}
	slices.SortStableFunc(ents, func(a, b pending) int { return comparePaths(a.rel, b.rel) })
	var links []pending
	for _, p := range ents {
		if p.n == nil {
			links = append(links, p)
			continue
		}
		if err := t.put(p.rel, p.n); err != nil {
			return fmt.Errorf("layer %s: %w", l.Name, err)
		}
	}
	// A link may name another link of the same layer: place those whose
	// targets exist until no more can be placed.
	for len(links) > 0 {
		var left []pending
		for _, p := range links {
			if _, ok := t.nodes[p.target]; !ok {
				left = append(left, p)
				continue
			}
			if err := t.link(p.rel, p.target); err != nil {
				return fmt.Errorf("layer %s: %w", l.Name, err)
			}
		}
		if len(left) == len(links) {
			p := left[0]
			return fmt.Errorf("layer %s: %w", l.Name, t.link(p.rel, p.target))
		}
		links = left
	}
	return nil
}

// headerEntry converts a tar header to an Entry (without a path).
func headerEntry(hdr *tar.Header) (Entry, error) {
	e := Entry{
		Type: hdr.Typeflag, Mode: hdr.Mode & 0o7777, UID: hdr.Uid, GID: hdr.Gid,
		Linkname: hdr.Linkname, Devmajor: hdr.Devmajor, Devminor: hdr.Devminor, Size: hdr.Size,
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeGNUSparse:
		// The reader expands sparse files; they are regular files here.
		e.Type = tar.TypeReg
	case tar.TypeDir, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		e.Size = 0
	default:
		return Entry{}, fmt.Errorf("unsupported entry type %q", hdr.Typeflag)
	}
	for k, v := range hdr.PAXRecords {
		if name, ok := strings.CutPrefix(k, "SCHILY.xattr."); ok {
			if e.Xattrs == nil {
				e.Xattrs = map[string]string{}
			}
			e.Xattrs[name] = v
		}
	}
	return e, nil
}

// errEscape is a name that would leave the root.
var errEscape = errors.New("name leaves the root")

// layerName turns a name in a layer into the tree's relative form: a
// leading "./", empty and "." components are dropped; an absolute name or
// a ".." component is rejected rather than interpreted.
func layerName(name string) (string, error) {
	if strings.ContainsRune(name, 0) {
		return "", errors.New("name contains a NUL byte")
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("absolute name: %w", errEscape)
	}
	var parts []string
	for _, c := range strings.Split(name, "/") {
		switch c {
		case "", ".":
		case "..":
			return "", fmt.Errorf("\"..\" in name: %w", errEscape)
		default:
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, "/"), nil
}
