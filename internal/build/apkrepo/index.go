package apkrepo

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Package is one record of an APKINDEX (or of an installed database).
type Package struct {
	Name, Version, Arch string
	// Checksum is the package identity, "Q1" and the base64 SHA-1 of the
	// .apk's control segment (the index's C: field).
	Checksum string
	// Size is the .apk's length (S:), InstalledSize its unpacked size (I:).
	Size, InstalledSize                                   int64
	Description, URL, License, Origin, Maintainer, Commit string
	BuildTime                                             int64
	// ProviderPriority (k:) lets an unversioned provide be chosen; HasPriority
	// says the field was present.
	ProviderPriority int
	HasPriority      bool
	Depends          []Dep
	Provides         []Provide
	// InstallIf (i:) is parsed and kept, but sbx never installs a package
	// because of it: only requests and dependencies bring packages in.
	InstallIf []Dep
	Replaces  []Dep
	// Repository is the repository URL the record came from; empty for
	// an installed package.
	Repository string

	// Installed-database only: the record's text as the base image had
	// it, and the paths (without leading slash) of the files it owns.
	raw   string
	files []string
}

// ID is "name-version", as apk prints a package.
func (p *Package) ID() string { return p.Name + "-" + p.Version }

// Filename is the .apk's path relative to a repository URL.
func (p *Package) Filename() string { return p.Arch + "/" + p.Name + "-" + p.Version + ".apk" }

// maxRecordLine bounds one line of an index or database.
const maxRecordLine = 1 << 20

// ParseIndex reads the records of an APKINDEX. A record lacking P:, V:
// or C:, with an invalid version or a malformed dependency is an error
// naming it: an index that verified but does not parse is not used in
// part. Fields sbx does not use are ignored.
func ParseIndex(r io.Reader) ([]*Package, error) {
	return parseRecords(r, false)
}

// ParseInstalled reads an installed database (/lib/apk/db/installed).
func ParseInstalled(r io.Reader) ([]*Package, error) {
	return parseRecords(r, true)
}

func parseRecords(r io.Reader, installed bool) ([]*Package, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxRecordLine)
	var out []*Package
	var cur *Package
	var raw bytes.Buffer
	dir := ""
	line := 0
	finish := func() error {
		if cur == nil {
			return nil
		}
		if cur.Name == "" || cur.Version == "" || (!installed && cur.Checksum == "") {
			return fmt.Errorf("record ending at line %d lacks P:, V: or C: (P:%q)", line, cur.Name)
		}
		if installed {
			cur.raw = raw.String()
		}
		out = append(out, cur)
		cur, dir = nil, ""
		raw.Reset()
		return nil
	}
	for sc.Scan() {
		line++
		l := sc.Text()
		if l == "" {
			if err := finish(); err != nil {
				return nil, err
			}
			continue
		}
		if len(l) < 2 || l[1] != ':' {
			return nil, fmt.Errorf("line %d: %q is not a field (X:value)", line, l)
		}
		if cur == nil {
			cur = &Package{}
		}
		raw.WriteString(l)
		raw.WriteByte('\n')
		if err := setField(cur, l[0], l[2:], &dir, installed); err != nil {
			return nil, fmt.Errorf("line %d (package %q): %w", line, cur.Name, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := finish(); err != nil {
		return nil, err
	}
	return out, nil
}

func setField(p *Package, k byte, v string, dir *string, installed bool) error {
	var err error
	switch k {
	case 'P':
		if !validPackageName(v) {
			return fmt.Errorf("name %q (P:) is not a package name", v)
		}
		p.Name = v
	case 'V':
		if !ValidVersion(v) {
			return fmt.Errorf("version %q (V:) is not an Alpine version", v)
		}
		p.Version = v
	case 'A':
		if !validArch(v) {
			return fmt.Errorf("architecture %q (A:) is not an apk architecture", v)
		}
		p.Arch = v
	case 'C':
		if !strings.HasPrefix(v, "Q1") || len(v) != 30 {
			return fmt.Errorf("checksum %q (C:) is not a Q1 SHA-1 identity", v)
		}
		p.Checksum = v
	case 'S':
		p.Size, err = strconv.ParseInt(v, 10, 64)
	case 'I':
		p.InstalledSize, err = strconv.ParseInt(v, 10, 64)
	case 'T':
		p.Description = v
	case 'U':
		p.URL = v
	case 'L':
		p.License = v
	case 'o':
		p.Origin = v
	case 'm':
		p.Maintainer = v
	case 'c':
		p.Commit = v
	case 't':
		p.BuildTime, err = strconv.ParseInt(v, 10, 64)
	case 'k':
		p.ProviderPriority, err = strconv.Atoi(v)
		p.HasPriority = true
	case 'D':
		p.Depends, err = parseDeps(v)
	case 'p':
		p.Provides, err = parseProvides(v)
	case 'i':
		p.InstallIf, err = parseDeps(v)
	case 'r':
		p.Replaces, err = parseDeps(v)
	case 'F':
		if installed {
			*dir = v
		}
	case 'R':
		if installed {
			f := v
			if *dir != "" {
				f = *dir + "/" + v
			}
			p.files = append(p.files, f)
		}
	}
	if err != nil {
		return fmt.Errorf("%c:%q: %w", k, v, err)
	}
	if (k == 'S' || k == 'I') && (p.Size < 0 || p.InstalledSize < 0) {
		return fmt.Errorf("%c:%q is negative", k, v)
	}
	return nil
}

// validPackageName follows apk-package(5): letters, digits and ._+-,
// starting with a letter or digit. Package names become file names and
// URL paths, so the rule is kept strictly.
func validPackageName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || strings.IndexByte("._+-", c) < 0) {
			return false
		}
	}
	return true
}

// validArch accepts apk architecture names ("x86_64", "armv7", "noarch").
func validArch(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
