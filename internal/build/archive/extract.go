package archive

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
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
//
// The file is held in memory whole; ExtractFileTo streams it instead.
func Extract(r io.Reader, pattern string) ([]byte, *tar.Header, error) {
	m, err := newMatcher(pattern)
	if err != nil {
		return nil, nil, err
	}
	var data []byte
	err = Walk(r, func(h *tar.Header, body io.Reader) error {
		if !m.visit(h) || h.Typeflag != tar.TypeReg {
			return nil
		}
		b, err := readBody(h, body)
		if err != nil {
			return fmt.Errorf("reading %s: %w", h.Name, err)
		}
		data = b
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if err := m.result(""); err != nil {
		return nil, nil, err
	}
	if h := m.hdr; h.Typeflag != tar.TypeReg {
		return nil, h, &LinkError{Name: h.Name, Target: linkTarget(h)}
	}
	return data, m.hdr, nil
}

// ExtractFile is Extract over the archive at name; it follows symlinks
// and hard links inside the archive (up to eight of them). The returned
// header is that of the file the bytes come from. The file is held in
// memory whole; ExtractFileTo streams it instead.
func ExtractFile(name, pattern string) ([]byte, *tar.Header, error) {
	var (
		data []byte
		hdr  *tar.Header
	)
	err := ExtractFileTo(name, pattern, func(h *tar.Header, body io.Reader) error {
		// The first pass has read the entry whole, so its size is true.
		b := make([]byte, h.Size)
		if _, err := io.ReadFull(body, b); err != nil {
			return fmt.Errorf("archive %s: reading %s: %w", name, h.Name, err)
		}
		data, hdr = b, h
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return data, hdr, nil
}

// ExtractFileTo finds the one file of the archive at name that pattern
// names, as ExtractFile does — the same patterns, the same link
// following, the same errors — and calls fn once with its header and a
// reader over its bytes, so that the file streams out of the archive and
// is never held in memory whole, however large it is. For a link, hdr is
// the header of the regular file the link resolves to. body is valid only
// until fn returns. An error from fn is returned as it is.
//
// The archive is read twice: a first pass finds the match, checks that it
// is the only one and resolves links from the entries it has seen (a
// pattern must match exactly one file, and a later copy of a name replaces
// an earlier one, so nothing can be handed out before the archive's end);
// a second pass stops at that entry and streams it. The archive must not
// change between the two: an entry that is no longer where the first pass
// found it is an error.
func ExtractFileTo(name, pattern string, fn func(hdr *tar.Header, body io.Reader) error) error {
	m, err := newMatcher(pattern)
	if err != nil {
		return err
	}
	seen := map[string]seenEntry{}
	var order []string
	ord := 0
	err = walkFileOnce(name, func(h *tar.Header, _ io.Reader) error {
		defer func() { ord++ }()
		if ord >= maxEntries {
			// What the first pass keeps grows with the entries: an
			// archive of millions of empty entries is refused, not held.
			return fmt.Errorf("more than %d entries; too many to look a file up in", maxEntries)
		}
		if !linkable(h.Typeflag) {
			return nil
		}
		if _, ok := seen[h.Name]; !ok {
			order = append(order, h.Name)
		}
		seen[h.Name] = seenEntry{ord: ord, typ: h.Typeflag, linkname: h.Linkname, size: h.Size}
		m.visit(h)
		return nil
	})
	if err != nil {
		return err
	}
	if err := m.result(name); err != nil {
		return err
	}
	target, err := resolve(name, m.hdr, seen, order)
	if err != nil {
		return err
	}
	want := seen[target]
	ord = 0
	var (
		reached bool
		fnErr   error
	)
	err = walkFileOnce(name, func(h *tar.Header, body io.Reader) error {
		if ord != want.ord {
			ord++
			return nil
		}
		reached = true
		if h.Name != target || h.Typeflag != tar.TypeReg || h.Size != want.size {
			return fmt.Errorf("%s is not at entry %d on a second reading: the archive changed while it was read", target, want.ord)
		}
		if fnErr = fn(h, body); fnErr != nil {
			return fnErr
		}
		return fs.SkipAll
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return err
	}
	if !reached {
		return fmt.Errorf("archive %s: it ended before entry %d (%s) on a second reading: the archive changed while it was read", name, want.ord, target)
	}
	return nil
}

// maxLinks is how many links ExtractFile and ExtractFileTo follow.
const maxLinks = 8

// maxEntries bounds the entries ExtractFile and ExtractFileTo read from
// one archive (a variable for tests).
var maxEntries = 1 << 22

// seenEntry is what the first pass of ExtractFileTo keeps of an entry: its
// position among the entries Walk visits, and what links need.
type seenEntry struct {
	ord      int
	typ      byte
	linkname string
	size     int64
}

// resolve follows the links from the matched entry hdr, through the
// entries the first pass saw, to a regular file, and returns its name.
func resolve(archiveName string, hdr *tar.Header, seen map[string]seenEntry, order []string) (string, error) {
	cur, e := hdr.Name, seen[hdr.Name]
	for range maxLinks {
		if e.typ == tar.TypeReg {
			return cur, nil
		}
		target := linkTarget(&tar.Header{Name: cur, Typeflag: e.typ, Linkname: e.linkname})
		if strings.HasPrefix(target, "../") || target == ".." {
			return "", fmt.Errorf("archive %s: %s links outside the archive (%s)", archiveName, cur, e.linkname)
		}
		if hasMeta(target) {
			return "", fmt.Errorf("archive %s: %s links to %q, which is not a plain name", archiveName, cur, target)
		}
		next, ok := seen[target]
		if !ok {
			var near nearSet
			near.init(target)
			for _, n := range order {
				near.add(n)
			}
			return "", &NotFoundError{Archive: archiveName, Pattern: "/" + target, Near: near.list()}
		}
		cur, e = target, next
	}
	return "", fmt.Errorf("archive %s: too many links resolving %q", archiveName, hdr.Name)
}

// walkFileOnce is WalkFile, with errors from reading the archive and from
// fn both named after the archive.
func walkFileOnce(name string, fn WalkFunc) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := Walk(f, fn); err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	return nil
}

// linkTarget is the archive path a symlink or hard link entry points at.
// A hard link names its target from the archive's root, a relative
// symlink from its own directory; an absolute name of either is taken from
// the archive's root.
func linkTarget(h *tar.Header) string {
	target := h.Linkname
	if h.Typeflag == tar.TypeSymlink && !path.IsAbs(target) {
		target = path.Join(path.Dir(h.Name), target)
	}
	return CleanName(strings.TrimLeft(target, "/"))
}

// maxPrealloc bounds the buffer readBody sizes from a header before any
// of the entry is read, so that a header claiming an absurd size costs
// nothing.
const maxPrealloc = 64 << 20

// readBody reads a regular file's bytes, allocating them once when the
// header's size is plausible.
func readBody(h *tar.Header, body io.Reader) ([]byte, error) {
	if h.Size < 0 || h.Size > maxPrealloc {
		return io.ReadAll(body)
	}
	b := make([]byte, h.Size)
	if _, err := io.ReadFull(body, b); err != nil {
		return nil, err
	}
	return b, nil
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

func linkable(typ byte) bool {
	return typ == tar.TypeReg || typ == tar.TypeSymlink || typ == tar.TypeLink
}

// matcher finds the entries matching a pattern as Walk visits them.
type matcher struct {
	pattern string // as given
	pat     string // cleaned
	glob    bool
	matches map[string]bool
	hdr     *tar.Header // the last copy of the first name matched
	near    nearSet
}

func newMatcher(pattern string) (*matcher, error) {
	pat := CleanName(strings.TrimLeft(pattern, "/"))
	if _, err := path.Match(pat, ""); err != nil {
		return nil, fmt.Errorf("bad pattern %q: %w", pattern, err)
	}
	m := &matcher{pattern: pattern, pat: pat, glob: hasMeta(pat), matches: map[string]bool{}}
	m.near.init(pat)
	return m, nil
}

// visit looks at the entry h and reports whether it is the match so far:
// the first name matched, in its latest copy.
func (m *matcher) visit(h *tar.Header) bool {
	if !linkable(h.Typeflag) {
		return false
	}
	ok := h.Name == m.pat
	if m.glob && !ok {
		ok, _ = path.Match(m.pat, h.Name)
	}
	if !ok {
		m.near.add(h.Name)
		return false
	}
	m.matches[h.Name] = true
	if len(m.matches) > 1 {
		return false
	}
	m.hdr = h
	return true
}

// result is the error for no match or several, or nil for exactly one.
func (m *matcher) result(archiveName string) error {
	switch {
	case len(m.matches) == 0:
		return &NotFoundError{Archive: archiveName, Pattern: m.pattern, Near: m.near.list()}
	case len(m.matches) > 1:
		names := make([]string, 0, len(m.matches))
		for n := range m.matches {
			names = append(names, n)
		}
		sort.Strings(names)
		e := &AmbiguousError{Archive: archiveName, Pattern: m.pattern, Count: len(names)}
		e.Matches = names[:min(len(names), 10)]
		return e
	}
	return nil
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
