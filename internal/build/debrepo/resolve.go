package debrepo

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"pault.ag/go/debian/dependency"
	"pault.ag/go/debian/version"
)

// Index is the packages of one or more Packages indexes for one
// architecture: packages of that architecture and of "all". Build it with
// NewIndex.
type Index struct {
	arch   string
	byName map[string][]*Package // newest version first
	// providers maps a virtual package name to the packages that provide
	// it, sorted by name and then newest first.
	providers map[string][]*Package
}

// NewIndex indexes pkgs for the Debian architecture arch ("amd64"). The
// same name, version and architecture in two sources is kept once, from
// the first source, so sources are listed in apt's order.
func NewIndex(arch string, sources ...[]*Package) *Index {
	ix := &Index{arch: arch, byName: map[string][]*Package{}, providers: map[string][]*Package{}}
	seen := map[string]bool{}
	for _, pkgs := range sources {
		for _, p := range pkgs {
			if p.Architecture != arch && p.Architecture != "all" {
				continue
			}
			key := p.Name + " " + p.Version.String() + " " + p.Architecture
			if seen[key] {
				continue
			}
			seen[key] = true
			ix.byName[p.Name] = append(ix.byName[p.Name], p)
			for _, pv := range p.provides {
				ix.providers[pv.Name] = append(ix.providers[pv.Name], p)
			}
		}
	}
	for _, l := range ix.byName {
		sort.SliceStable(l, func(i, j int) bool { return version.Compare(l[i].Version, l[j].Version) > 0 })
	}
	for _, l := range ix.providers {
		sort.SliceStable(l, func(i, j int) bool {
			if l[i].Name != l[j].Name {
				return l[i].Name < l[j].Name
			}
			return version.Compare(l[i].Version, l[j].Version) > 0
		})
	}
	return ix
}

// Arch is the index's architecture.
func (ix *Index) Arch() string { return ix.arch }

// Versions returns the versions of name the index has, newest first.
func (ix *Index) Versions(name string) []*Package { return ix.byName[name] }

// Request is one package a spec asks for, with an optional version
// relation.
type Request struct {
	Name     string
	Relation *dependency.VersionRelation
}

func (r Request) String() string {
	if r.Relation == nil {
		return r.Name
	}
	return fmt.Sprintf("%s (%s %s)", r.Name, r.Relation.Operator, r.Relation.Number)
}

// ParseRequest parses "NAME", "NAME=VERSION" or "NAME OP VERSION" with OP
// one of Debian's relations (<<, <=, =, >=, >>), with or without spaces
// and parentheses: "git", "git=1:2.39.5-0+deb12u2", "git (>= 1:2.39)".
func ParseRequest(s string) (Request, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexAny(t, "<>=( ")
	if i < 0 {
		if !validPackageName(t) {
			return Request{}, fmt.Errorf("%q is not a Debian package name", s)
		}
		return Request{Name: t}, nil
	}
	name, rest := t[:i], strings.TrimSpace(t[i:])
	if !validPackageName(name) {
		return Request{}, fmt.Errorf("%q is not a Debian package name", name)
	}
	rest = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(rest, "("), ")"))
	op := ""
	for _, o := range []string{"<<", "<=", ">=", ">>", "="} {
		if strings.HasPrefix(rest, o) {
			op = o
			break
		}
	}
	if op == "" {
		return Request{}, fmt.Errorf("%q: a version relation is one of <<, <=, =, >=, >> followed by a version", s)
	}
	v := strings.TrimSpace(rest[len(op):])
	if _, err := version.Parse(v); err != nil || v == "" || strings.ContainsAny(v, " ()") {
		return Request{}, fmt.Errorf("%q: %q is not a Debian version", s, v)
	}
	return Request{Name: name, Relation: &dependency.VersionRelation{Operator: op, Number: v}}, nil
}

// validPackageName follows Debian policy 5.6.1: lower-case letters,
// digits, +, - and ., at least two characters, starting alphanumeric.
func validPackageName(s string) bool {
	if len(s) < 2 {
		return false
	}
	for i, c := range s {
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("+-.", c)) {
			return false
		}
	}
	return true
}

// ResolveOptions adjust Resolve.
type ResolveOptions struct {
	// Installed are the packages the base image already has (its dpkg
	// status). A dependency they satisfy adds nothing.
	Installed []*Package
	// Essential adds every Essential: yes and Priority: required package
	// of the index (and its closure) that Installed does not hold, the
	// set debootstrap's minbase variant installs: an image with no dpkg
	// database needs the packages every Debian package and script may
	// use without declaring them (a shell, awk, coreutils…).
	Essential bool
	// Prefer maps package names to versions to choose when they are
	// available and satisfy every relation that reaches them (the pins
	// of the previous lock), so that a changed request moves no other
	// package.
	Prefer map[string]string
}

// Resolve returns the packages to install for reqs: the requests and the
// closure of their Pre-Depends and Depends, minus what opts.Installed
// already satisfies, sorted by name. The rules, in the order they apply:
//
//   - A relation already satisfied by an installed or chosen package
//     (by name and version, or by a Provides whose version, if the
//     relation has one, satisfies it) adds nothing.
//   - Otherwise its alternatives are tried in order; the first that some
//     package of the index satisfies is taken: the real package of that
//     name at the preferred version if it qualifies, else its newest
//     version that satisfies the relation, else (a virtual package) the
//     first provider by name. An alternative naming a package already
//     chosen at a version that does not satisfy it is skipped.
//   - An architecture qualifier other than :any, :native or the index's
//     architecture satisfies nothing (only one architecture is installed).
//   - Requests are handled sorted by name, dependencies breadth first in
//     field order, and relations with alternatives only once no relation
//     without any is left, so that an alternative chosen for another
//     reason wins. The result depends only on the request set, the
//     options and the index.
//
// Finally every Conflicts and Breaks of a chosen package is checked
// against the chosen and installed packages, and of an installed package
// against the chosen ones. Any failure is an error naming the chain of
// dependencies that brought each package in.
func Resolve(ix *Index, reqs []Request, opts ResolveOptions) ([]*Package, error) {
	r := &resolver{
		ix:        ix,
		opts:      opts,
		chosen:    map[string]*Package{},
		installed: map[string]*Package{},
		provided:  map[string][]*Package{},
		parent:    map[string]string{},
		why:       map[string]string{},
	}
	for _, p := range opts.Installed {
		r.installed[p.Name] = p
		for _, pv := range p.provides {
			r.provided[pv.Name] = append(r.provided[pv.Name], p)
		}
	}
	reqs = slices.Clone(reqs)
	sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].Name < reqs[j].Name })
	if opts.Essential {
		var names []string
		for name, l := range ix.byName {
			if (l[0].Essential || l[0].Priority == "required") && r.installed[name] == nil {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			reqs = append(reqs, Request{Name: n})
		}
	}
	for _, q := range reqs {
		poss := dependency.Possibility{Name: q.Name, Version: q.Relation}
		if p := r.chosen[q.Name]; p != nil {
			if !satisfiesVersion(p.Version, q.Relation) {
				return nil, fmt.Errorf("%s is requested, but %s was chosen already: %s", q, p.ID(), r.chain(p.Name))
			}
			continue
		}
		if p := r.installed[q.Name]; p != nil && satisfiesVersion(p.Version, q.Relation) {
			continue
		}
		p := r.pickReal(poss)
		if p == nil {
			return nil, r.missing(q.String(), "requested", q.Name, poss)
		}
		r.choose(p, "", "requested")
	}
	// Relations with alternatives wait until every relation without
	// any is in, so that an alternative some other package needs anyway
	// is the one taken.
	for next, deferredNext := 0, 0; next < len(r.queue) || deferredNext < len(r.deferred); {
		if next < len(r.queue) {
			if err := r.depends(r.queue[next]); err != nil {
				return nil, err
			}
			next++
			continue
		}
		d := r.deferred[deferredNext]
		deferredNext++
		if err := r.relation(d.pkg, d.field, d.rel, false); err != nil {
			return nil, err
		}
	}
	if err := r.conflicts(); err != nil {
		return nil, err
	}
	out := make([]*Package, 0, len(r.chosen))
	for _, p := range r.chosen {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

type resolver struct {
	ix        *Index
	opts      ResolveOptions
	chosen    map[string]*Package
	installed map[string]*Package
	provided  map[string][]*Package // virtual name -> chosen or installed providers
	queue     []*Package
	parent    map[string]string // chosen package -> the package whose dependency chose it
	deferred  []deferredRel
	why       map[string]string // chosen package -> the relation that chose it
}

type deferredRel struct {
	pkg   *Package
	field string
	rel   dependency.Relation
}

func (r *resolver) choose(p *Package, parent, why string) {
	r.chosen[p.Name] = p
	r.parent[p.Name] = parent
	r.why[p.Name] = why
	delete(r.installed, p.Name)
	for _, pv := range p.provides {
		r.provided[pv.Name] = append(r.provided[pv.Name], p)
	}
	r.queue = append(r.queue, p)
}

func (r *resolver) depends(p *Package) error {
	for _, field := range []struct{ name, raw string }{{"Pre-Depends", p.PreDepends}, {"Depends", p.Depends}} {
		rels, err := p.relations(field.name, field.raw)
		if err != nil {
			return err
		}
		for _, rel := range rels {
			if err := r.relation(p, field.name, rel, true); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *resolver) relation(p *Package, field string, rel dependency.Relation, mayDefer bool) error {
	for _, poss := range rel.Possibilities {
		if r.have(poss) != nil {
			return nil
		}
	}
	if mayDefer && len(rel.Possibilities) > 1 {
		r.deferred = append(r.deferred, deferredRel{p, field, rel})
		return nil
	}
	var blocked []string
	for _, poss := range rel.Possibilities {
		if !r.archOK(poss) {
			continue
		}
		if q := r.chosen[poss.Name]; q != nil {
			blocked = append(blocked, fmt.Sprintf("%s %s was chosen: %s", q.Name, q.Version, r.chain(q.Name)))
			continue
		}
		if q := r.installed[poss.Name]; q != nil {
			// The base's version does not satisfy the relation: a newer
			// one from the index replaces it.
			if c := r.pickReal(poss); c != nil {
				r.choose(c, p.Name, relString(rel))
				return nil
			}
			blocked = append(blocked, fmt.Sprintf("the base image has %s %s", q.Name, q.Version))
			continue
		}
		if c := r.pick(poss); c != nil {
			r.choose(c, p.Name, relString(rel))
			return nil
		}
	}
	what := fmt.Sprintf("%s %s %s", p.ID(), strings.ToLower(field), relString(rel))
	if len(blocked) > 0 {
		return fmt.Errorf("%s, which nothing can satisfy (%s); %s is needed because %s", what, strings.Join(blocked, "; "), p.Name, r.chain(p.Name))
	}
	return fmt.Errorf("%s, which no package in the repositories provides; %s is needed because %s", what, p.Name, r.chain(p.Name))
}

// have returns the chosen or installed package satisfying poss, or nil.
func (r *resolver) have(poss dependency.Possibility) *Package {
	if !r.archOK(poss) {
		return nil
	}
	for _, m := range []map[string]*Package{r.chosen, r.installed} {
		if p := m[poss.Name]; p != nil && satisfiesVersion(p.Version, poss.Version) {
			return p
		}
	}
	for _, p := range r.provided[poss.Name] {
		if r.chosen[p.Name] != p && r.installed[p.Name] != p {
			continue
		}
		if providesSatisfy(p, poss) {
			return p
		}
	}
	return nil
}

func (r *resolver) archOK(poss dependency.Possibility) bool {
	if poss.Arch == nil {
		return true
	}
	a := poss.Arch.String()
	return a == "any" || a == "native" || a == r.ix.arch
}

// pickReal returns the real package poss names at the preferred version,
// or its newest version satisfying poss.
func (r *resolver) pickReal(poss dependency.Possibility) *Package {
	cands := r.ix.byName[poss.Name]
	if want, ok := r.opts.Prefer[poss.Name]; ok {
		for _, c := range cands {
			if c.Version.String() == want && satisfiesVersion(c.Version, poss.Version) {
				return c
			}
		}
	}
	for _, c := range cands {
		if satisfiesVersion(c.Version, poss.Version) {
			return c
		}
	}
	return nil
}

// pick is pickReal, falling back to the first provider of a virtual
// package that is not blocked by a chosen package of its name.
func (r *resolver) pick(poss dependency.Possibility) *Package {
	if c := r.pickReal(poss); c != nil {
		return c
	}
	for _, c := range r.ix.providers[poss.Name] {
		if q := r.chosen[c.Name]; q != nil && q != c {
			continue
		}
		if providesSatisfy(c, poss) {
			return c
		}
	}
	return nil
}

// providesSatisfy reports whether one of p's Provides satisfies poss: an
// unversioned relation by any Provides of the name, a versioned one only
// by a versioned Provides whose version satisfies it (Debian policy 7.5).
func providesSatisfy(p *Package, poss dependency.Possibility) bool {
	for _, pv := range p.provides {
		if pv.Name != poss.Name {
			continue
		}
		if poss.Version == nil {
			return true
		}
		if pv.Version == nil || pv.Version.Operator != "=" {
			continue
		}
		v, err := version.Parse(pv.Version.Number)
		if err == nil && poss.Version.SatisfiedBy(v) {
			return true
		}
	}
	return false
}

func satisfiesVersion(v version.Version, rel *dependency.VersionRelation) bool {
	return rel == nil || rel.SatisfiedBy(v)
}

func relString(rel dependency.Relation) string {
	var parts []string
	for _, p := range rel.Possibilities {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, " | ")
}

// chain says why name is in the set: "requested" or "git depends on
// perl, perl depends on perl-base (>= 5.36)".
func (r *resolver) chain(name string) string {
	var steps []string
	for i := 0; i < 1000; i++ {
		parent := r.parent[name]
		if parent == "" {
			break
		}
		steps = append(steps, fmt.Sprintf("%s depends on %s", parent, r.why[name]))
		name = parent
	}
	if len(steps) == 0 {
		if _, ok := r.chosen[name]; ok {
			return name + " is " + r.why[name]
		}
		return name + " is in the base image"
	}
	slices.Reverse(steps)
	return name + " is " + r.why[name] + ", " + strings.Join(steps, ", ")
}

func (r *resolver) missing(what, why, name string, poss dependency.Possibility) error {
	if vs := r.ix.byName[name]; len(vs) > 0 {
		var have []string
		for _, v := range vs {
			have = append(have, v.Version.String())
		}
		return fmt.Errorf("%s is %s, but the repositories have only %s %s", what, why, name, strings.Join(have, ", "))
	}
	if len(r.ix.providers[name]) > 0 {
		return fmt.Errorf("%s is %s, but no provider of the virtual package %s satisfies %s", what, why, name, poss.String())
	}
	return fmt.Errorf("%s is %s, but no repository has a package %s", what, why, name)
}

// conflicts checks Conflicts and Breaks between every pair of packages of
// which at least one is chosen.
func (r *resolver) conflicts() error {
	all := make([]*Package, 0, len(r.chosen)+len(r.installed))
	for _, p := range r.chosen {
		all = append(all, p)
	}
	for _, p := range r.installed {
		all = append(all, p)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	for _, p := range all {
		_, pChosen := r.chosen[p.Name]
		for _, field := range []struct{ name, raw string }{{"Conflicts", p.Conflicts}, {"Breaks", p.Breaks}} {
			rels, err := p.relations(field.name, field.raw)
			if err != nil {
				return err
			}
			for _, rel := range rels {
				for _, poss := range rel.Possibilities {
					for _, q := range all {
						if q == p || q.Name == p.Name {
							continue
						}
						if _, qChosen := r.chosen[q.Name]; !pChosen && !qChosen {
							continue
						}
						hit := q.Name == poss.Name && satisfiesVersion(q.Version, poss.Version) || providesSatisfy(q, poss)
						if hit {
							return fmt.Errorf("%s %s %s, and %s is in the set: %s; %s", p.ID(), strings.ToLower(field.name), poss.String(), q.ID(), r.chain(p.Name), r.chain(q.Name))
						}
					}
				}
			}
		}
	}
	return nil
}
