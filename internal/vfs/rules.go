package vfs

import (
	"github.com/sbx-dev/sbx/policy"
	"github.com/sbx-dev/sbx/policy/match"
)

// Class is what a mount's path rules make of one path (policy/match's
// classes).
type Class = match.Class

// Classes, from the least to the most restrictive of the host-backed
// ones; see match.Class.
const (
	Plain        = match.Plain
	ReadOnlyPath = match.ReadOnlyPath
	TmpfsPath    = match.TmpfsPath
	Hidden       = match.Hidden
)

// Rules are a mount's compiled path rules. They are immutable, so a
// server may read them from any goroutine.
//
// A path is the slash-separated path of a file relative to the mount's
// root, clean, with no leading slash ("" is the root itself). The
// patterns are policy/match's mount rule patterns (match.CompileMount),
// the language lang validates with: a rule that matches a directory
// applies to everything under it, and a trailing slash does not limit a
// pattern to directories (the wider reading is the safe one for hide and
// readonly, and it keeps a path's class independent of what the host has
// there).
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
	match.MountRules
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

// CompileRules compiles the path rules of m with policy/match, the
// language lang validates with, so that a policy that bypassed validation
// is refused here rather than matched differently.
func CompileRules(m policy.Mount) (*Rules, error) {
	mr, err := match.CompileMountRules(m.Hide, m.ReadOnly, m.Tmpfs)
	if err != nil {
		return nil, err
	}
	return &Rules{MountRules: *mr, ro: m.Access != policy.ReadWrite}, nil
}

func split(rel string) []string { return match.Split(rel) }

// Classify returns the class of the path rel.
func (r *Rules) Classify(rel string) Class {
	if c := r.MountRules.Classify(rel); c != Plain {
		return c
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
	if r.MountRules.Hidden(rel) {
		return place{hidden: true}
	}
	var p place
	p.memRoot, p.inMem = r.MountRules.InMemory(rel)
	_, ro := match.MatchAny(r.ReadOnly, split(rel))
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

// renameNeedsScan reports whether renaming the directory from to to
// may change the class of a path under it, so that samePlaces must look.
// Without patterns nothing can, and git protection only near a git
// directory or a path it pins.
func (r *Rules) renameNeedsScan(from, to string) bool {
	if !r.MountRules.Empty() {
		return true
	}
	return r.git != nil && (r.git.near(from) || r.git.near(to))
}
