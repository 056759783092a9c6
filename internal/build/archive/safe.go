package archive

import (
	"archive/tar"
	"fmt"
	"path"
	"strings"
)

// UnsafeEntryError says an entry would land, or point, outside the
// directory a tree is extracted into.
type UnsafeEntryError struct {
	Name   string // the entry's name as Walk passed it
	Reason string
}

func (e *UnsafeEntryError) Error() string {
	return fmt.Sprintf("unsafe archive entry %q: %s", e.Name, e.Reason)
}

// CheckEntry reports whether hdr, as Walk passes it, is safe to create
// under a directory holding the whole tree: its name must be relative and
// stay inside ("a/../../b" does not), a hard link must name another entry
// inside the tree, and a relative symlink must not climb above the tree's
// root. An absolute symlink target is accepted: in a root filesystem it
// means the tree's own root ("/etc/alternatives/x"), so whoever writes the
// tree to a host directory must not follow links while writing (os.Root
// does not). The error is an *UnsafeEntryError naming the entry.
func CheckEntry(hdr *tar.Header) error {
	name := hdr.Name
	if reason := escapes(name); reason != "" {
		return &UnsafeEntryError{Name: name, Reason: reason}
	}
	switch hdr.Typeflag {
	case tar.TypeLink:
		if reason := escapes(hdr.Linkname); reason != "" {
			return &UnsafeEntryError{Name: name, Reason: fmt.Sprintf("hard link target %q: %s", hdr.Linkname, reason)}
		}
	case tar.TypeSymlink:
		t := hdr.Linkname
		if t == "" {
			return &UnsafeEntryError{Name: name, Reason: "symlink with an empty target"}
		}
		if path.IsAbs(t) {
			return nil
		}
		if j := path.Join(path.Dir(name), t); j == ".." || strings.HasPrefix(j, "../") {
			return &UnsafeEntryError{Name: name, Reason: fmt.Sprintf("symlink target %q leads outside the tree", t)}
		}
	}
	return nil
}

// escapes says why an archive path is not a relative path inside the
// tree, or "" if it is.
func escapes(name string) string {
	switch {
	case name == "":
		return "empty name"
	case path.IsAbs(name):
		return "absolute path"
	case strings.ContainsRune(name, 0):
		return "NUL in name"
	}
	c := path.Clean(name)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "escapes the tree with .."
	}
	return ""
}
