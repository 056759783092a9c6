package vfs

import (
	"fmt"
	"path"
	"strings"

	"github.com/sbx-dev/sbx/policy"
)

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

// Rules are a mount's compiled path rules. They are immutable, so a
// server may read them from any goroutine.
//
// A path is the slash-separated path of a file relative to the mount's
// root, clean, with no leading slash ("" is the root itself). Patterns
// follow gitignore: a pattern with no slash but a trailing one matches a
// name at any depth ("*.pem", ".env"); one with a slash elsewhere is
// anchored at the root (".git/config", "docs/*.md"); "*", "?" and
// "[...]" match within one name; a "**" name matches any number of
// names ("**/*.pem", "build/**"). A rule that matches a directory
// applies to everything under it. Unlike gitignore, a trailing slash
// does not limit a pattern to directories: "secrets/" also hides a file
// named secrets. For hide and readonly the wider reading is the safe one,
// and it keeps a path's class independent of what the host has there. Negation ("!") is refused: a hide rule with exceptions is
// easy to get wrong, and language validation refuses it already.
//
// When rules overlap the most restrictive wins, in this order: hidden,
// read-only, tmpfs, plain. A read-only pattern inside a tmpfs path thus
// makes that part of the scratch space read-only, and a hide pattern
// anywhere keeps its files invisible, even when they would be in memory.
//
// A server adds git protection to a read-write mount's rules (see
// gitGuard): its read-only paths classify as ReadOnlyPath and its
// sequencer state as TmpfsPath, below the mount's own hide and tmpfs
// rules, since neither reaches git on the host.
type Rules struct {
	hide, readonly, tmpfs []pattern
	// ro is the mount's access: every host-backed path refuses changes.
	ro bool
	// git is the server's git protection, nil when there is none.
	git *gitGuard
}

// withGit returns a copy of r with git protection g.
func (r *Rules) withGit(g *gitGuard) *Rules {
	c := *r
	c.git = g
	return &c
}

// pattern is one compiled rule pattern.
type pattern struct {
	src   string
	elems []string // the names, "**" standing for any number
}

// CompileRules compiles the path rules of m. It fails on a pattern that
// language validation would have refused, so that a policy that bypassed
// it is refused here rather than matched differently.
func CompileRules(m policy.Mount) (*Rules, error) {
	r := &Rules{ro: m.Access != policy.ReadWrite}
	for _, set := range []struct {
		name string
		src  []string
		dst  *[]pattern
	}{{"hide", m.Hide, &r.hide}, {"readonly", m.ReadOnly, &r.readonly}, {"tmpfs", m.Tmpfs, &r.tmpfs}} {
		for _, s := range set.src {
			p, err := compilePattern(s)
			if err != nil {
				return nil, fmt.Errorf("%s pattern %q: %w", set.name, s, err)
			}
			*set.dst = append(*set.dst, p)
		}
	}
	return r, nil
}

func compilePattern(s string) (pattern, error) {
	p := pattern{src: s}
	switch {
	case s == "" || s == "/":
		return p, fmt.Errorf("empty pattern")
	case strings.HasPrefix(s, "!"):
		return p, fmt.Errorf("negated patterns are not supported")
	case strings.HasPrefix(s, "/"):
		return p, fmt.Errorf("absolute pattern; patterns are relative to the mount's root")
	case strings.ContainsRune(s, 0):
		return p, fmt.Errorf("NUL byte")
	}
	s = strings.TrimSuffix(s, "/")
	elems := strings.Split(s, "/")
	for _, e := range elems {
		switch e {
		case "", ".", "..":
			return p, fmt.Errorf("%q is not a clean relative pattern", p.src)
		}
		if e == "**" {
			continue
		}
		if _, err := path.Match(e, ""); err != nil {
			return p, err
		}
	}
	if len(elems) == 1 {
		// gitignore: a pattern without a slash matches at any depth.
		elems = append([]string{"**"}, elems...)
	}
	p.elems = elems
	return p, nil
}

// literal reports whether the pattern names exactly one path (no
// wildcard, anchored), and that path.
func (p pattern) literal() (string, bool) {
	if len(p.elems) > 1 && p.elems[0] == "**" && !strings.Contains(p.src, "/") {
		// "node_modules": at any depth, but its root-level instance is
		// one path.
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

// matchExact reports whether the pattern matches the path itself (not
// an ancestor of it).
func (p pattern) matchExact(names []string) bool {
	return matchElems(p.elems, names)
}

func matchElems(pat, names []string) bool {
	// Bounded: each "**" tries every split, and paths are at most
	// PATH_MAX long; patterns hold few "**".
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			if len(rest) == 0 {
				// A trailing "/**" matches what is inside, as in
				// gitignore, not the directory itself.
				return len(names) > 0
			}
			for i := 0; i <= len(names); i++ {
				if matchElems(rest, names[i:]) {
					return true
				}
			}
			return false
		}
		if len(names) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], names[0]); !ok {
			return false
		}
		pat, names = pat[1:], names[1:]
	}
	return len(names) == 0
}

// matchAny reports whether any pattern matches the path or one of its
// ancestors, and the length of the shortest such prefix.
func matchAny(pats []pattern, names []string) (int, bool) {
	if len(pats) == 0 {
		return 0, false
	}
	for n := 1; n <= len(names); n++ {
		for _, p := range pats {
			if p.matchExact(names[:n]) {
				return n, true
			}
		}
	}
	return 0, false
}

func split(rel string) []string {
	if rel == "" {
		return nil
	}
	return strings.Split(rel, "/")
}

// Classify returns the class of the path rel.
func (r *Rules) Classify(rel string) Class {
	names := split(rel)
	if _, ok := matchAny(r.hide, names); ok {
		return Hidden
	}
	if _, ok := matchAny(r.readonly, names); ok {
		return ReadOnlyPath
	}
	if _, ok := matchAny(r.tmpfs, names); ok {
		return TmpfsPath
	}
	if r.git != nil {
		switch g := r.git.classify(rel); {
		case g.readOnly:
			return ReadOnlyPath
		case g.mem:
			return TmpfsPath
		}
	}
	return Plain
}

// place is where a path lives and what may be done to it.
type place struct {
	hidden bool
	// inMem says the path is in the in-memory tree rooted at memRoot.
	inMem   bool
	memRoot string
	// writable is false on read-only paths and, outside memory, in a
	// read-only mount. Scratch space never touches the host, so a
	// read-only mount may still have it.
	writable bool
	// pinned is set on what leads the host's git to a repository (see
	// gitPlace); a directory rename must keep it in place.
	pinned bool
	// noLinks refuses symbolic links: the path is in a git directory
	// (see gitPlace).
	noLinks bool
}

func (r *Rules) place(rel string) place {
	names := split(rel)
	if _, ok := matchAny(r.hide, names); ok {
		return place{hidden: true}
	}
	var p place
	if n, ok := matchAny(r.tmpfs, names); ok {
		p.inMem, p.memRoot = true, strings.Join(names[:n], "/")
	}
	_, ro := matchAny(r.readonly, names)
	if !p.inMem && r.git != nil {
		// Memory never reaches the host's git; the host does.
		g := r.git.classify(rel)
		ro = ro || g.readOnly
		p.pinned, p.noLinks = g.pinned, g.inGit
		if g.mem {
			p.inMem, p.memRoot = true, g.memRoot
		}
	}
	p.writable = !ro && (p.inMem || !r.ro)
	return p
}

// tmpfsLiterals are the tmpfs paths that exist from the start, as empty
// directories: those a pattern names exactly.
func (r *Rules) tmpfsLiterals() []string {
	var out []string
	for _, p := range r.tmpfs {
		if l, ok := p.literal(); ok {
			out = append(out, l)
		}
	}
	return out
}

// renameNeedsScan reports whether renaming the directory from to to
// may change the class of a path under it, so that samePlaces must look.
// Without patterns nothing can, and git protection only near a git
// directory or a path it pins.
func (r *Rules) renameNeedsScan(from, to string) bool {
	if len(r.hide) > 0 || len(r.readonly) > 0 || len(r.tmpfs) > 0 {
		return true
	}
	return r.git != nil && (r.git.near(from) || r.git.near(to))
}
