package match

import (
	"fmt"
	"path"
	"strings"
)

// Mount is a compiled mount rule pattern (a hide, readonly or tmpfs
// entry; see the package doc). It is immutable.
type Mount struct {
	src   string
	elems []string // the names, "**" standing for any number
}

// CompileMount compiles a mount rule pattern. It refuses an empty
// pattern, "/", a negated one ("!x"), an absolute one, a NUL byte, an
// empty, "." or ".." name ("a//b", "./secrets", "../x") and a name that
// path.Match cannot parse ("[a"). The error names the pattern.
func CompileMount(s string) (*Mount, error) {
	bad := func(format string, args ...any) (*Mount, error) {
		return nil, fmt.Errorf("pattern %q: %s", s, fmt.Sprintf(format, args...))
	}
	switch {
	case s == "" || s == "/":
		return bad("empty pattern")
	case strings.HasPrefix(s, "!"):
		return bad("negated patterns are not supported; list the paths the rule applies to")
	case strings.HasPrefix(s, "/"):
		return bad("absolute pattern; patterns are relative to the mount's root")
	case strings.ContainsRune(s, 0):
		return bad("NUL byte")
	}
	elems := strings.Split(strings.TrimSuffix(s, "/"), "/")
	for _, e := range elems {
		switch e {
		case "":
			return bad("an empty name (\"//\"); patterns are clean relative paths")
		case ".", "..":
			return bad("a %q name; patterns are clean relative paths, without \".\" or \"..\"", e)
		}
		if e == "**" {
			continue
		}
		if _, err := path.Match(e, ""); err != nil {
			return bad("name %q: %v", e, err)
		}
	}
	if len(elems) == 1 {
		// gitignore: a pattern without a slash matches at any depth.
		elems = append([]string{"**"}, elems...)
	}
	return &Mount{src: s, elems: elems}, nil
}

// String returns the pattern as written.
func (p *Mount) String() string { return p.src }

// Literal reports whether the pattern names exactly one path (no
// wildcard, anchored), and that path; a name without a slash
// ("node_modules") names its root-level instance.
func (p *Mount) Literal() (string, bool) {
	if len(p.elems) > 1 && p.elems[0] == "**" && !strings.Contains(p.src, "/") {
		if hasMeta(p.elems[1]) {
			return "", false
		}
		return p.elems[1], true
	}
	for _, e := range p.elems {
		if hasMeta(e) {
			return "", false
		}
	}
	return strings.Join(p.elems, "/"), true
}

func hasMeta(e string) bool { return strings.ContainsAny(e, `*?[\`) }

// MatchNames reports whether the pattern matches the path names (a
// relative path split at "/") itself, not an ancestor of it.
func (p *Mount) MatchNames(names []string) bool {
	return matchElems(p.elems, names)
}

// matchElems matches names against pattern names, where "**" matches
// any number of names, except as the pattern's last name, where it
// matches one or more (a trailing "/**" matches what is inside, as in
// gitignore, not the directory itself). It fills a table over (pattern
// position, name position), so its time is bounded by their product
// whatever the pattern: a guest that makes deep paths cannot make a
// pattern with several "**" slow.
func matchElems(pat, names []string) bool {
	step(len(pat) * (len(names) + 1))
	// ok[j] says whether pat[i:] matches names[j:], computed from the end.
	ok := make([]bool, len(names)+1)
	ok[len(names)] = true
	next := make([]bool, len(names)+1)
	for i := len(pat) - 1; i >= 0; i-- {
		cur := next
		switch {
		case pat[i] == "**" && i == len(pat)-1:
			for j := range cur {
				cur[j] = j < len(names)
			}
		case pat[i] == "**":
			cur[len(names)] = ok[len(names)]
			for j := len(names) - 1; j >= 0; j-- {
				cur[j] = ok[j] || cur[j+1]
			}
		default:
			cur[len(names)] = false
			for j := len(names) - 1; j >= 0; j-- {
				m, _ := path.Match(pat[i], names[j])
				cur[j] = ok[j+1] && m
			}
		}
		ok, next = cur, ok
	}
	return ok[0]
}

// MatchAny reports whether any of pats matches the path names or one of
// their ancestors, and the length of the shortest such prefix. Each
// pattern reads the names once, from the root down (firstMatch), so its
// time is bounded by the product of the pattern's and the path's lengths
// for all the prefixes together: the guest chooses how deep its paths
// are, and the file server asks for every name it lists.
func MatchAny(pats []*Mount, names []string) (int, bool) {
	best := len(names) + 1
	for _, p := range pats {
		if n, ok := p.firstMatch(names[:best-1]); ok {
			best = n
		}
	}
	if best > len(names) {
		return 0, false
	}
	return best, true
}

// firstMatch returns the length of the shortest non-empty prefix of
// names that the pattern matches (as MatchNames would), reading names
// once: it keeps the set of pattern positions the names so far can
// reach, and stops when that set is empty.
func (p *Mount) firstMatch(names []string) (int, bool) {
	pat := p.elems
	k := len(pat)
	// A "**" that is not the last name may match no name: reaching it
	// reaches what follows it. The last one matches one or more names.
	skip := func(s []bool) {
		for i := 0; i < k-1; i++ {
			if s[i] && pat[i] == "**" {
				s[i+1] = true
			}
		}
	}
	cur := make([]bool, k+1)
	next := make([]bool, k+1)
	cur[0] = true
	skip(cur)
	for j, name := range names {
		step(k + 1)
		clear(next)
		live := false
		for i := 0; i < k; i++ {
			if !cur[i] {
				continue
			}
			switch {
			case pat[i] == "**":
				next[i] = true
				if i == k-1 {
					next[k] = true
				}
				live = true
			default:
				if m, _ := path.Match(pat[i], name); m {
					next[i+1] = true
					live = true
				}
			}
		}
		if !live {
			return 0, false
		}
		skip(next)
		if next[k] {
			return j + 1, true
		}
		cur, next = next, cur
	}
	return 0, false
}

// Split splits a relative path as the mount rules take it ("" is the
// root, with no names).
func Split(rel string) []string {
	if rel == "" {
		return nil
	}
	return strings.Split(rel, "/")
}

// Class is what a mount's path rules make of one path.
type Class uint8

// Classes, from the least to the most restrictive of the host-backed
// ones. Tmpfs stands apart: its files live in the server's memory.
const (
	// Plain paths are the host's, readable and, in an "rw" mount,
	// writable.
	Plain Class = iota
	// ReadOnlyPath paths are the host's and refuse every change (EROFS),
	// whatever the mount's access.
	ReadOnlyPath
	// TmpfsPath paths live in memory, private to the sandbox; the host is
	// never consulted for them.
	TmpfsPath
	// Hidden paths do not exist for the guest.
	Hidden
)

func (c Class) String() string {
	switch c {
	case Plain:
		return "plain"
	case ReadOnlyPath:
		return "readonly"
	case TmpfsPath:
		return "tmpfs"
	case Hidden:
		return "hidden"
	}
	return fmt.Sprintf("Class(%d)", c)
}

// MountRules are a mount's compiled hide, readonly and tmpfs patterns.
// They are immutable, so they may be read from any goroutine. When rules
// overlap the most restrictive wins, in this order: hidden, read-only,
// tmpfs, plain.
type MountRules struct {
	Hide, ReadOnly, Tmpfs []*Mount
}

// CompileMountRules compiles a mount's three pattern lists. The error
// names the list and the pattern.
func CompileMountRules(hide, readonly, tmpfs []string) (*MountRules, error) {
	r := &MountRules{}
	for _, set := range []struct {
		name string
		src  []string
		dst  *[]*Mount
	}{{"hide", hide, &r.Hide}, {"readonly", readonly, &r.ReadOnly}, {"tmpfs", tmpfs, &r.Tmpfs}} {
		for _, s := range set.src {
			p, err := CompileMount(s)
			if err != nil {
				return nil, fmt.Errorf("%s %w", set.name, err)
			}
			*set.dst = append(*set.dst, p)
		}
	}
	return r, nil
}

// Empty reports whether there are no patterns at all.
func (r *MountRules) Empty() bool {
	return len(r.Hide) == 0 && len(r.ReadOnly) == 0 && len(r.Tmpfs) == 0
}

// Classify returns the class of the path rel (slash-separated, relative
// to the mount's root, clean, "" for the root) by the patterns alone. A
// rule that matches a directory applies to everything under it.
func (r *MountRules) Classify(rel string) Class {
	names := Split(rel)
	if _, ok := MatchAny(r.Hide, names); ok {
		return Hidden
	}
	if _, ok := MatchAny(r.ReadOnly, names); ok {
		return ReadOnlyPath
	}
	if _, ok := MatchAny(r.Tmpfs, names); ok {
		return TmpfsPath
	}
	return Plain
}

// Hidden reports whether a hide pattern matches rel or an ancestor of it.
func (r *MountRules) Hidden(rel string) bool {
	_, ok := MatchAny(r.Hide, Split(rel))
	return ok
}

// InMemory reports whether a tmpfs pattern matches rel or an ancestor of
// it, and the shortest such path, the root of its scratch space. A file
// server keeps such a path in memory, read-only where a readonly
// pattern also matches it (Classify then says ReadOnlyPath), so the
// guest never sees the host's file there unless it is Hidden.
func (r *MountRules) InMemory(rel string) (root string, ok bool) {
	names := Split(rel)
	n, ok := MatchAny(r.Tmpfs, names)
	if !ok {
		return "", false
	}
	return strings.Join(names[:n], "/"), true
}

// HiddenBy returns the hide patterns, as written, that match rel itself.
// A path under a hidden directory is hidden too (Classify says Hidden)
// without being listed here: this is for callers that walk a host tree
// from the top, stop at the first hidden name and say which rules hid
// it, as sbx plan does.
func (r *MountRules) HiddenBy(rel string) []string {
	names := Split(rel)
	var out []string
	for _, p := range r.Hide {
		if len(names) > 0 && p.MatchNames(names) {
			out = append(out, p.src)
		}
	}
	return out
}

// TmpfsLiterals are the tmpfs paths a pattern names exactly (Literal),
// which a file server makes exist from the start.
func (r *MountRules) TmpfsLiterals() []string {
	var out []string
	for _, p := range r.Tmpfs {
		if l, ok := p.Literal(); ok {
			out = append(out, l)
		}
	}
	return out
}
