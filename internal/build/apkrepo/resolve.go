package apkrepo

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Index is the packages of one or more APKINDEXes for one architecture
// (and noarch). Build it with NewIndex.
type Index struct {
	arch      string
	byName    map[string][]*Package // newest first
	providers map[string][]*Package // provided name -> packages providing it
}

// NewIndex indexes pkgs for the apk architecture arch. The same name and
// version in two repositories is kept once, from the first, so
// repositories are listed in /etc/apk/repositories order.
func NewIndex(arch string, repos ...[]*Package) *Index {
	ix := &Index{arch: arch, byName: map[string][]*Package{}, providers: map[string][]*Package{}}
	seen := map[string]bool{}
	for _, pkgs := range repos {
		for _, p := range pkgs {
			if p.Arch != arch && p.Arch != "noarch" {
				continue
			}
			if seen[p.ID()] {
				continue
			}
			seen[p.ID()] = true
			ix.byName[p.Name] = append(ix.byName[p.Name], p)
			for _, pv := range p.Provides {
				ix.providers[pv.Name] = append(ix.providers[pv.Name], p)
			}
		}
	}
	for _, l := range ix.byName {
		sort.SliceStable(l, func(i, j int) bool { return CompareVersions(l[i].Version, l[j].Version) > 0 })
	}
	return ix
}

// Arch is the index's architecture.
func (ix *Index) Arch() string { return ix.arch }

// Versions returns the versions of name the index has, newest first.
func (ix *Index) Versions(name string) []*Package { return ix.byName[name] }

// ResolveOptions adjust Resolve.
type ResolveOptions struct {
	// Installed are the packages the base image already has (its
	// /lib/apk/db/installed). A dependency they satisfy adds nothing.
	Installed []*Package
	// Prefer maps package names to versions to choose when they are
	// available and satisfy every constraint that reaches them (the pins
	// of the previous lock).
	Prefer map[string]string
}

// Resolve returns the packages to install for reqs (world constraints:
// "git", "curl>=8", "!doc-tool") and the closure of their dependencies,
// minus what opts.Installed already satisfies, sorted by name. The rules:
//
//   - A dependency already satisfied by a chosen or installed package
//     (by name and version, or by a provide: an unversioned dependency
//     by any provide of the name, a versioned one by a versioned provide
//     whose version satisfies it) adds nothing.
//   - Otherwise the real package of that name is taken: the preferred
//     version if it qualifies, else the highest version satisfying the
//     constraint. An installed package whose version does not satisfy
//     it is replaced by one from the index.
//   - Otherwise a provider: among packages whose versioned provide of the
//     name satisfies the constraint, the highest provider priority (k:),
//     then the highest provided version, then the package name, then the
//     package version. A name with only unversioned provides is chosen
//     only from providers that declare a priority (as apk does); with
//     none, the error lists the providers to request by name.
//   - One version per name: a dependency naming a package already chosen
//     at a version that does not satisfy it is an error.
//   - install_if (i:) never brings a package in.
//   - Requests are handled sorted by name, dependencies breadth first in
//     field order. The result depends only on the requests, the options
//     and the index.
//
// Finally conflicts are checked among the chosen and installed packages
// (at least one of each pair chosen): a "!dep" of a package or request
// matching another package by name or provide, and two packages owning
// the same name (one named so, or providing it with a version). Every
// error names the chain of dependencies that brought each package in.
func Resolve(ix *Index, reqs []Dep, opts ResolveOptions) ([]*Package, error) {
	r := &resolver{ix: ix, opts: opts, chosen: map[string]*Package{}, installed: map[string]*Package{}, parent: map[string]string{}, why: map[string]string{}}
	for _, p := range opts.Installed {
		r.installed[p.Name] = p
	}
	reqs = slices.Clone(reqs)
	sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].Name < reqs[j].Name })
	var conflicts []Dep
	for _, q := range reqs {
		if q.Conflict {
			conflicts = append(conflicts, q)
			continue
		}
		if err := r.dep(nil, q); err != nil {
			return nil, err
		}
	}
	for i := 0; i < len(r.queue); i++ {
		p := r.queue[i]
		for _, d := range p.Depends {
			if d.Conflict {
				continue
			}
			if err := r.dep(p, d); err != nil {
				return nil, err
			}
		}
	}
	if err := r.conflicts(conflicts); err != nil {
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
	queue     []*Package
	parent    map[string]string // chosen package -> the package whose dependency chose it
	why       map[string]string // chosen package -> the dependency that chose it
}

func (r *resolver) choose(p *Package, parent *Package, d Dep) {
	r.chosen[p.Name] = p
	r.why[p.Name] = d.String()
	if parent != nil {
		r.parent[p.Name] = parent.Name
	}
	delete(r.installed, p.Name)
	r.queue = append(r.queue, p)
}

// have returns the chosen or installed package satisfying d, or nil.
func (r *resolver) have(d Dep) *Package {
	for _, m := range []map[string]*Package{r.chosen, r.installed} {
		if p := m[d.Name]; p != nil && d.matchesPackage(p) {
			return p
		}
	}
	for _, m := range []map[string]*Package{r.chosen, r.installed} {
		for _, n := range sortedKeys(m) {
			if d.matchesProvide(m[n]) {
				return m[n]
			}
		}
	}
	return nil
}

func (r *resolver) dep(from *Package, d Dep) error {
	if r.have(d) != nil {
		return nil
	}
	what := "requested " + d.String()
	if from != nil {
		what = fmt.Sprintf("%s depends on %s", from.ID(), d)
	}
	because := func() string {
		if from == nil {
			return ""
		}
		return "; " + r.chain(from.Name)
	}
	if q := r.chosen[d.Name]; q != nil {
		return fmt.Errorf("%s, but %s was chosen: %s%s", what, q.ID(), r.chain(q.Name), because())
	}
	if c := r.pickReal(d); c != nil {
		r.choose(c, from, d)
		return nil
	}
	if vs := r.ix.byName[d.Name]; len(vs) > 0 {
		var have []string
		for _, v := range vs {
			have = append(have, v.Version)
		}
		return fmt.Errorf("%s, but the repositories have only %s %s%s", what, d.Name, strings.Join(have, ", "), because())
	}
	c, err := r.pickProvider(d)
	if err != nil {
		return fmt.Errorf("%s: %w%s", what, err, because())
	}
	r.choose(c, from, d)
	return nil
}

func (r *resolver) pickReal(d Dep) *Package {
	cands := r.ix.byName[d.Name]
	if want, ok := r.opts.Prefer[d.Name]; ok {
		for _, c := range cands {
			if c.Version == want && d.matchesPackage(c) {
				return c
			}
		}
	}
	for _, c := range cands {
		if d.matchesPackage(c) {
			return c
		}
	}
	return nil
}

func (r *resolver) pickProvider(d Dep) (*Package, error) {
	type cand struct {
		p   *Package
		ver string
	}
	var versioned, prioritised []cand
	var unprioritised []string
	for _, p := range r.ix.providers[d.Name] {
		if q := r.chosen[p.Name]; q != nil && q != p {
			continue
		}
		for _, pv := range p.Provides {
			if pv.Name != d.Name {
				continue
			}
			switch {
			case pv.Version != "":
				if d.Op == "" || d.Op != "><" && d.matchesVersion(pv.Version) {
					versioned = append(versioned, cand{p, pv.Version})
				}
			case d.Op != "":
			case p.HasPriority:
				prioritised = append(prioritised, cand{p, ""})
			default:
				unprioritised = append(unprioritised, p.ID())
			}
			break
		}
	}
	best := func(cs []cand) *Package {
		sort.SliceStable(cs, func(i, j int) bool {
			a, b := cs[i], cs[j]
			if a.p.ProviderPriority != b.p.ProviderPriority {
				return a.p.ProviderPriority > b.p.ProviderPriority
			}
			if c := CompareVersions(a.ver, b.ver); c != 0 {
				return c > 0
			}
			if a.p.Name != b.p.Name {
				return a.p.Name < b.p.Name
			}
			return CompareVersions(a.p.Version, b.p.Version) > 0
		})
		return cs[0].p
	}
	switch {
	case len(versioned) > 0:
		return best(versioned), nil
	case len(prioritised) > 0:
		return best(prioritised), nil
	case len(unprioritised) > 0:
		sort.Strings(unprioritised)
		return nil, fmt.Errorf("%s is a virtual name provided by %s without a version or priority; request one of them by name", d.Name, strings.Join(unprioritised, ", "))
	case len(r.ix.providers[d.Name]) > 0:
		return nil, fmt.Errorf("no provider of %s satisfies %s", d.Name, d)
	}
	return nil, fmt.Errorf("no repository has a package or provider named %s", d.Name)
}

// chain says why name is in the set: "git is requested" or "libcurl is
// curl>=8 of curl, which is git of (requested)".
func (r *resolver) chain(name string) string {
	if _, ok := r.chosen[name]; !ok {
		return name + " is in the base image"
	}
	var steps []string
	for i := 0; i < 10000; i++ {
		parent, ok := r.parent[name]
		if !ok {
			steps = append(steps, fmt.Sprintf("%s is requested (%s)", name, r.why[name]))
			break
		}
		steps = append(steps, fmt.Sprintf("%s depends on %s", parent, r.why[name]))
		name = parent
	}
	slices.Reverse(steps)
	return strings.Join(steps, ", ")
}

// conflicts checks every conflict and ownership clash among the chosen
// and installed packages in which at least one chosen package takes part.
func (r *resolver) conflicts(reqConflicts []Dep) error {
	all := make([]*Package, 0, len(r.chosen)+len(r.installed))
	for _, n := range sortedKeys(r.chosen) {
		all = append(all, r.chosen[n])
	}
	for _, n := range sortedKeys(r.installed) {
		all = append(all, r.installed[n])
	}
	isChosen := func(p *Package) bool { return r.chosen[p.Name] == p }
	for _, d := range reqConflicts {
		for _, q := range all {
			if isChosen(q) && d.satisfiedBy(q) {
				return fmt.Errorf("the request %s forbids %s, which is in the set: %s", d, q.ID(), r.chain(q.Name))
			}
		}
	}
	for _, p := range all {
		for _, d := range p.Depends {
			if !d.Conflict {
				continue
			}
			for _, q := range all {
				if q == p || !isChosen(p) && !isChosen(q) {
					continue
				}
				if d.satisfiedBy(q) {
					return fmt.Errorf("%s conflicts with %s, and %s is in the set: %s; %s", p.ID(), d, q.ID(), r.chain(p.Name), r.chain(q.Name))
				}
			}
		}
	}
	owner := map[string]*Package{}
	for _, p := range all {
		names := []string{p.Name}
		for _, pv := range p.Provides {
			if pv.Version != "" {
				names = append(names, pv.Name)
			}
		}
		for _, n := range names {
			q := owner[n]
			if q == nil {
				owner[n] = p
				continue
			}
			if q != p && (isChosen(p) || isChosen(q)) {
				return fmt.Errorf("%s and %s both provide %s, and only one package may own a name: %s; %s", q.ID(), p.ID(), n, r.chain(q.Name), r.chain(p.Name))
			}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
