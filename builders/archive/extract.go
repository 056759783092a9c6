package archive

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
)

// NotFoundError says an archive has no file matching a name or pattern.
// Near lists up to five entries that came close: the same base name in
// another directory, or another file in the same directory.
type NotFoundError struct {
	Archive string // the archive's path, or "" for a reader
	Pattern string
	Near    []string
}

func (e *NotFoundError) Error() string {
	s := fmt.Sprintf("archive %shas no file %q", archiveLabel(e.Archive), e.Pattern)
	if len(e.Near) > 0 {
		s += "; near: " + strings.Join(e.Near, ", ")
	}
	return s
}

// AmbiguousError says a pattern matches more than one file.
type AmbiguousError struct {
	Archive string
	Pattern string
	Matches []string // sorted; at most ten
	Count   int
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("pattern %q matches %d files in archive %s(%s); it must match exactly one",
		e.Pattern, e.Count, archiveLabel(e.Archive), strings.Join(e.Matches, ", "))
}

// LinkError says the matched entry is a symlink or hard link. ExtractFile
// follows links itself; Extract, which reads its archive once, cannot.
type LinkError struct {
	Archive string
	Name    string
	Target  string // the link's target as an archive path
}

func (e *LinkError) Error() string {
	return fmt.Sprintf("archive %s: %s is a link to %s", strings.TrimSpace(archiveLabel(e.Archive)), e.Name, e.Target)
}

func archiveLabel(name string) string {
	if name == "" {
		return ""
	}
	return name + " "
}

// Extract reads the one file of the archive read from r whose cleaned
// name matches pattern, and returns its bytes and header. pattern is a
// name ("package/claude") or a path.Match glob ("boot/vmlinuz-*") that
// must match exactly one regular file, symlink or hard link; a leading
// "./" or "/" is ignored. If an entry appears more than once, the last
// copy wins, as when a tar is unpacked. No match gives a *NotFoundError,
// several an *AmbiguousError, a link a *LinkError.
func Extract(r io.Reader, pattern string) ([]byte, *tar.Header, error) {
	return extract(r, "", pattern)
}

// ExtractFile is Extract over the archive at name; it follows symlinks
// and hard links inside the archive (up to eight of them).
func ExtractFile(name, pattern string) ([]byte, *tar.Header, error) {
	for range 8 {
		f, err := os.Open(name)
		if err != nil {
			return nil, nil, err
		}
		data, hdr, err := extract(f, name, pattern)
		f.Close()
		le, ok := err.(*LinkError)
		if !ok {
			return data, hdr, err
		}
		if strings.HasPrefix(le.Target, "../") || le.Target == ".." {
			return nil, nil, fmt.Errorf("archive %s: %s links outside the archive (%s)", name, le.Name, hdr.Linkname)
		}
		pattern = "/" + le.Target
		if hasMeta(pattern) {
			return nil, nil, fmt.Errorf("archive %s: %s links to %q, which is not a plain name", name, le.Name, le.Target)
		}
	}
	return nil, nil, fmt.Errorf("archive %s: too many links resolving %q", name, pattern)
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

func extract(r io.Reader, archiveName, pattern string) ([]byte, *tar.Header, error) {
	pat := CleanName(strings.TrimLeft(pattern, "/"))
	if _, err := path.Match(pat, ""); err != nil {
		return nil, nil, fmt.Errorf("bad pattern %q: %w", pattern, err)
	}
	glob := hasMeta(pat)
	var (
		matches = map[string]bool{}
		hdr     *tar.Header
		data    []byte
		near    nearSet
	)
	near.init(pat)
	err := Walk(r, func(h *tar.Header, body io.Reader) error {
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeSymlink, tar.TypeLink:
		default:
			return nil
		}
		ok := h.Name == pat
		if glob && !ok {
			ok, _ = path.Match(pat, h.Name)
		}
		if !ok {
			near.add(h.Name)
			return nil
		}
		matches[h.Name] = true
		if len(matches) > 1 {
			return nil
		}
		hdr = h
		data = nil
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(body)
			if err != nil {
				return fmt.Errorf("reading %s: %w", h.Name, err)
			}
			data = b
		}
		return nil
	})
	if err != nil {
		if archiveName != "" {
			err = fmt.Errorf("archive %s: %w", archiveName, err)
		}
		return nil, nil, err
	}
	switch {
	case len(matches) == 0:
		return nil, nil, &NotFoundError{Archive: archiveName, Pattern: pattern, Near: near.list()}
	case len(matches) > 1:
		names := make([]string, 0, len(matches))
		for n := range matches {
			names = append(names, n)
		}
		sort.Strings(names)
		e := &AmbiguousError{Archive: archiveName, Pattern: pattern, Count: len(names)}
		e.Matches = names[:min(len(names), 10)]
		return nil, nil, e
	}
	switch hdr.Typeflag {
	case tar.TypeSymlink:
		target := hdr.Linkname
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(hdr.Name), target)
		}
		return nil, hdr, &LinkError{Archive: archiveName, Name: hdr.Name, Target: CleanName(strings.TrimLeft(target, "/"))}
	case tar.TypeLink:
		return nil, hdr, &LinkError{Archive: archiveName, Name: hdr.Name, Target: hdr.Linkname}
	}
	return data, hdr, nil
}

// nearSet collects names close to a pattern, for error messages.
type nearSet struct {
	dir, base    string
	sameBase     []string
	sameDir      []string
	foldedLookup string
}

const nearMax = 5

func (n *nearSet) init(pat string) {
	n.dir, n.base = path.Split(pat)
	n.dir = strings.TrimSuffix(n.dir, "/")
	n.foldedLookup = strings.ToLower(pat)
}

func (n *nearSet) add(name string) {
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")
	if ok, _ := path.Match(n.base, base); ok || strings.ToLower(name) == n.foldedLookup {
		if len(n.sameBase) < 100 {
			n.sameBase = append(n.sameBase, name)
		}
		return
	}
	if dir == n.dir && len(n.sameDir) < 100 {
		n.sameDir = append(n.sameDir, name)
	}
}

func (n *nearSet) list() []string {
	sort.Strings(n.sameBase)
	sort.Strings(n.sameDir)
	var out []string
	for _, s := range append(slices.Compact(n.sameBase), slices.Compact(n.sameDir)...) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out[:min(len(out), nearMax)]
}
