package debrepo

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"pault.ag/go/debian/control"
	"pault.ag/go/debian/dependency"
	"pault.ag/go/debian/version"
)

// Package is one binary package stanza of a Packages index (or of a dpkg
// status file). The relation fields are kept as written and parsed when
// the resolver needs them.
type Package struct {
	Name         string
	Version      version.Version
	Architecture string
	MultiArch    string
	Essential    bool
	Priority     string
	// Filename is the .deb's path relative to the repository's base URI
	// ("pool/main/g/git/git_2.39.5-0+deb12u2_amd64.deb").
	Filename string
	Size     int64
	SHA256   string
	// Depends, PreDepends, Provides, Conflicts and Breaks are the raw
	// relation fields.
	Depends, PreDepends, Provides, Conflicts, Breaks string
	// Source is the index the stanza came from, for messages; empty for
	// dpkg status.
	Source string

	provides []dependency.Possibility
}

// ID is "name version architecture", as messages print a package.
func (p *Package) ID() string {
	return fmt.Sprintf("%s %s (%s)", p.Name, p.Version, p.Architecture)
}

// ParsePackages reads the stanzas of a Packages index. A stanza without
// Package, Version or Architecture, or with a malformed version or
// relation field, is an error naming it: an index that verified against
// its signature but does not parse is not used in part.
func ParsePackages(r io.Reader, source string) ([]*Package, error) {
	pr, err := control.NewParagraphReader(bufio.NewReaderSize(r, 1<<16), nil)
	if err != nil {
		return nil, err
	}
	var out []*Package
	for {
		para, err := pr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		p, err := packageFromFields(para.Values, source)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		out = append(out, p)
	}
}

func packageFromFields(v map[string]string, source string) (*Package, error) {
	p := &Package{
		Name:         v["Package"],
		Architecture: v["Architecture"],
		MultiArch:    v["Multi-Arch"],
		Essential:    v["Essential"] == "yes",
		Priority:     v["Priority"],
		Filename:     v["Filename"],
		SHA256:       strings.ToLower(v["SHA256"]),
		Depends:      v["Depends"],
		PreDepends:   v["Pre-Depends"],
		Provides:     v["Provides"],
		Conflicts:    v["Conflicts"],
		Breaks:       v["Breaks"],
		Source:       source,
	}
	if p.Name == "" || p.Architecture == "" || v["Version"] == "" {
		return nil, fmt.Errorf("a stanza lacks Package, Version or Architecture (Package %q)", p.Name)
	}
	ver, err := version.Parse(v["Version"])
	if err != nil {
		return nil, fmt.Errorf("package %s: version %q: %v", p.Name, v["Version"], err)
	}
	p.Version = ver
	if s := v["Size"]; s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("package %s: bad Size %q", p.Name, s)
		}
		p.Size = n
	}
	if p.Provides != "" {
		d, err := dependency.Parse(p.Provides)
		if err != nil {
			return nil, fmt.Errorf("package %s: Provides %q: %v", p.Name, p.Provides, err)
		}
		for _, rel := range d.Relations {
			p.provides = append(p.provides, rel.Possibilities...)
		}
	}
	return p, nil
}

// relations parses one of p's relation fields.
func (p *Package) relations(field, raw string) ([]dependency.Relation, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	d, err := dependency.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %s %q: %v", p.ID(), field, raw, err)
	}
	return d.Relations, nil
}

// ParseStatus reads a dpkg status file and returns the packages whose
// Status says they are installed ("install ok installed", or unpacked
// and half-configured ones, whose files are present).
func ParseStatus(r io.Reader) ([]*Package, error) {
	pr, err := control.NewParagraphReader(bufio.NewReader(r), nil)
	if err != nil {
		return nil, err
	}
	var out []*Package
	for {
		para, err := pr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("dpkg status: %w", err)
		}
		st := strings.Fields(para.Values["Status"])
		if len(st) != 3 || st[2] == "not-installed" || st[2] == "config-files" {
			continue
		}
		p, err := packageFromFields(para.Values, "")
		if err != nil {
			return nil, fmt.Errorf("dpkg status: %w", err)
		}
		out = append(out, p)
	}
}
