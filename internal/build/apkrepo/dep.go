package apkrepo

import (
	"fmt"
	"strings"
)

// Dep is one dependency, conflict or world constraint in apk notation:
// [!]name[@tag][op version]. Names may be namespaced virtual names
// ("so:libc.musl-x86_64.so.1", "cmd:git", "pc:zlib").
type Dep struct {
	Name string
	// Tag is the repository tag after "@"; sbx reads it and otherwise
	// ignores it (every configured repository is searched).
	Tag string
	// Op is "", "<", "<=", "=", ">=", ">", "~", "<~", ">~", or "><" (Version
	// is then a package identity checksum, "Q1…").
	Op      string
	Version string
	// Conflict is a leading "!": no package matching the rest may be
	// installed.
	Conflict bool
}

func (d Dep) String() string {
	s := d.Name
	if d.Conflict {
		s = "!" + s
	}
	if d.Tag != "" {
		s += "@" + d.Tag
	}
	return s + d.Op + d.Version
}

// ParseDep parses one dependency in apk notation.
func ParseDep(s string) (Dep, error) {
	var d Dep
	t := s
	if strings.HasPrefix(t, "!") {
		d.Conflict = true
		t = t[1:]
	}
	i := strings.IndexAny(t, "<>=~")
	name := t
	if i >= 0 {
		name = t[:i]
		j := i
		for j < len(t) && strings.IndexByte("<>=~", t[j]) >= 0 {
			j++
		}
		d.Op, d.Version = t[i:j], t[j:]
		switch d.Op {
		case "<", "<=", "=", ">=", ">", "~", "<~", ">~":
			if !ValidVersion(d.Version) {
				return Dep{}, fmt.Errorf("dependency %q: %q is not an Alpine version", s, d.Version)
			}
		case "~=", "=~":
			// Older apk wrote the prefix match with an equals sign.
			d.Op = "~"
			if !ValidVersion(d.Version) {
				return Dep{}, fmt.Errorf("dependency %q: %q is not an Alpine version", s, d.Version)
			}
		case "><":
			if !strings.HasPrefix(d.Version, "Q1") || len(d.Version) != 30 {
				return Dep{}, fmt.Errorf("dependency %q: %q is not a package identity (Q1 and 28 base64 characters)", s, d.Version)
			}
		default:
			return Dep{}, fmt.Errorf("dependency %q: unknown operator %q", s, d.Op)
		}
	}
	if n, tag, ok := strings.Cut(name, "@"); ok {
		name, d.Tag = n, tag
		if tag == "" {
			return Dep{}, fmt.Errorf("dependency %q: empty repository tag", s)
		}
	}
	if !validName(name) {
		return Dep{}, fmt.Errorf("dependency %q: %q is not a package name", s, name)
	}
	d.Name = name
	return d, nil
}

// validName accepts package names and the names packages provide
// (namespaced ones, and paths such as "/bin/sh", which real indexes
// depend on): printable ASCII without spaces, operators, "!" or "@",
// starting with a letter, a digit or "/".
func validName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	c0 := s[0]
	if !(c0 >= 'a' && c0 <= 'z' || c0 >= 'A' && c0 <= 'Z' || c0 >= '0' && c0 <= '9' || c0 == '/') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("<>=~!@", c) >= 0 {
			return false
		}
	}
	return true
}

// parseDeps parses a space-separated dependency list.
func parseDeps(s string) ([]Dep, error) {
	var out []Dep
	for _, f := range strings.Fields(s) {
		d, err := ParseDep(f)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Provide is one name a package provides, with a version ("so:libz.so.1=1.3.1")
// or without.
type Provide struct {
	Name, Version string
}

func (p Provide) String() string {
	if p.Version == "" {
		return p.Name
	}
	return p.Name + "=" + p.Version
}

func parseProvides(s string) ([]Provide, error) {
	var out []Provide
	for _, f := range strings.Fields(s) {
		d, err := ParseDep(f)
		if err != nil {
			return nil, err
		}
		if d.Conflict || d.Tag != "" || d.Op != "" && d.Op != "=" {
			return nil, fmt.Errorf("provides %q: only name or name=version", f)
		}
		out = append(out, Provide{Name: d.Name, Version: d.Version})
	}
	return out, nil
}

// matchesVersion reports whether a version v satisfies d's operator,
// ignoring Conflict. A dependency without operator matches any version.
func (d Dep) matchesVersion(v string) bool {
	var less, equal, greater, fuzzy bool
	switch d.Op {
	case "":
		return true
	case "<":
		less = true
	case "<=":
		less, equal = true, true
	case "=":
		equal = true
	case ">=":
		greater, equal = true, true
	case ">":
		greater = true
	case "~":
		equal, fuzzy = true, true
	case "<~":
		less, equal, fuzzy = true, true, true
	case ">~":
		greater, equal, fuzzy = true, true, true
	default:
		return false
	}
	switch compareVersions(v, d.Version, fuzzy) {
	case -1:
		return less
	case 0:
		return equal
	default:
		return greater
	}
}

// matchesPackage reports whether p satisfies d by name (and version, or
// identity for "><"), ignoring Conflict.
func (d Dep) matchesPackage(p *Package) bool {
	if p.Name != d.Name {
		return false
	}
	if d.Op == "><" {
		return p.Checksum == d.Version
	}
	return d.matchesVersion(p.Version)
}

// matchesProvide reports whether one of p's provides satisfies d: an
// unversioned dependency by any provide of the name, a versioned one only
// by a versioned provide whose version satisfies it.
func (d Dep) matchesProvide(p *Package) bool {
	for _, pv := range p.Provides {
		if pv.Name != d.Name {
			continue
		}
		if d.Op == "" {
			return true
		}
		if pv.Version != "" && d.Op != "><" && d.matchesVersion(pv.Version) {
			return true
		}
	}
	return false
}

// satisfiedBy is matchesPackage or matchesProvide.
func (d Dep) satisfiedBy(p *Package) bool {
	return d.matchesPackage(p) || d.matchesProvide(p)
}
