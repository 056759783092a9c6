package lang

import (
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/hashicorp/hcl/v2"
)

// ParseSource parses a source string as written in a spec (see Source for
// the forms) and records rng as its position. It never touches the network
// or the file system: it checks syntax only, and leaves every relative path
// relative (cleaned).
//
// Every source but a Debian package must say which version it means: an
// OCI reference needs a tag or a digest, an npm source a version, range or
// dist-tag. A deb source may name an exact version, version relations, or
// none (apt's candidate when the lock is made). The lock file then pins
// the exact bytes.
func ParseSource(raw string, rng hcl.Range) (*Source, error) {
	src := &Source{Raw: raw, Range: rng}
	if raw == "" {
		return nil, fmt.Errorf("empty source")
	}
	if strings.TrimSpace(raw) != raw {
		return nil, fmt.Errorf("source %q has leading or trailing space", raw)
	}
	for _, c := range raw {
		if c < 0x20 || c == 0x7f {
			return nil, fmt.Errorf("source %q has a control character", raw)
		}
	}
	var err error
	switch {
	case strings.HasPrefix(raw, "oci-layout:"):
		err = parseOCILayout(src, strings.TrimPrefix(raw, "oci-layout:"))
	case strings.HasPrefix(raw, "oci:"):
		err = parseOCI(src, strings.TrimPrefix(raw, "oci:"))
	case strings.HasPrefix(raw, "npm:"):
		err = parseNPM(src, strings.TrimPrefix(raw, "npm:"))
	case strings.HasPrefix(raw, "deb:"):
		err = parseDeb(src, strings.TrimPrefix(raw, "deb:"))
	case strings.HasPrefix(raw, "file:"):
		err = parseFileSource(src, strings.TrimPrefix(raw, "file:"))
	case strings.HasPrefix(raw, "https://"):
		err = parseURL(src, raw)
	case strings.HasPrefix(raw, "http://"):
		return nil, fmt.Errorf("source %q uses plain http; downloads must use https:// (a local file can be named with file:PATH)", raw)
	case strings.Contains(raw, "://"):
		scheme, _, _ := strings.Cut(raw, "://")
		return nil, fmt.Errorf("source %q has the unsupported scheme %q; sources are OCI references, oci:, oci-layout:, npm:, deb:, file: or https://", raw, scheme)
	default:
		err = parseOCI(src, raw)
	}
	if err != nil {
		return nil, err
	}
	return src, nil
}

func parseOCI(src *Source, ref string) error {
	src.Kind = SourceOCI
	if ref == "" {
		return fmt.Errorf("source %q: empty OCI reference", src.Raw)
	}
	r, err := name.ParseReference(ref, name.WeakValidation)
	if err != nil {
		return fmt.Errorf("source %q is not a valid OCI image reference (or a known source kind: oci:, oci-layout:, npm:, deb:, file:, https://): %v", src.Raw, err)
	}
	if _, ok := r.(name.Tag); ok && !hasExplicitTag(ref) {
		return fmt.Errorf("source %q names no tag or digest; write a tag (as in \"alpine:3.23\") or a digest (\"…@sha256:…\")", src.Raw)
	}
	// Keep the reference as written: name.ParseReference fills in the
	// default registry and repository namespace; the spec's own spelling
	// is what the lock records and plans show.
	src.Ref = ref
	return nil
}

// hasExplicitTag reports whether an OCI reference (without a digest)
// spells out its tag: a colon after the last slash.
func hasExplicitTag(ref string) bool {
	last := ref[strings.LastIndex(ref, "/")+1:]
	return strings.Contains(last, ":")
}

func parseOCILayout(src *Source, rest string) error {
	src.Kind = SourceOCILayout
	dir, version := rest, ""
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		dir, version = rest[:i], rest[i+1:]
		algo, hex, ok := strings.Cut(version, ":")
		if !ok || algo != "sha256" || !isSHA256(hex) {
			return fmt.Errorf("source %q: the digest after @ must be sha256: and 64 lower-case hex digits", src.Raw)
		}
	} else if i := strings.LastIndex(rest, ":"); i > strings.LastIndex(rest, "/") {
		dir, version = rest[:i], rest[i+1:]
		if !validTag(version) {
			return fmt.Errorf("source %q: %q is not a valid tag", src.Raw, version)
		}
	}
	if dir == "" {
		return fmt.Errorf("source %q names no directory; write oci-layout:DIR[:TAG|@sha256:DIGEST]", src.Raw)
	}
	src.Ref = cleanSlashPath(dir)
	src.Version = version
	return nil
}

// validTag reports whether s is an OCI tag: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}.
func validTag(s string) bool {
	if s == "" || len(s) > 128 || s[0] == '.' || s[0] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func parseNPM(src *Source, rest string) error {
	src.Kind = SourceNPM
	// The version follows the last "@" that is not the scope's leading one.
	i := strings.LastIndex(rest, "@")
	if i <= 0 {
		return fmt.Errorf("source %q names no version; write npm:NAME@VERSION (an exact version, a range or a dist-tag such as latest)", src.Raw)
	}
	pkg, version := rest[:i], rest[i+1:]
	if version == "" {
		return fmt.Errorf("source %q has an empty version after @", src.Raw)
	}
	if err := checkNPMName(pkg); err != nil {
		return fmt.Errorf("source %q: %v", src.Raw, err)
	}
	src.Ref, src.Version = pkg, version
	return nil
}

// checkNPMName applies npm's rules for new package names: lower case,
// URL-safe characters, at most 214 characters, an optional @scope/.
func checkNPMName(pkg string) error {
	if len(pkg) > 214 {
		return fmt.Errorf("npm package name %q is longer than 214 characters", pkg)
	}
	base := pkg
	if strings.HasPrefix(pkg, "@") {
		scope, rest, ok := strings.Cut(pkg[1:], "/")
		if !ok || scope == "" || rest == "" {
			return fmt.Errorf("npm package name %q: a scoped name is @scope/name", pkg)
		}
		if err := checkNPMPart(scope); err != nil {
			return fmt.Errorf("npm package name %q: scope %v", pkg, err)
		}
		base = rest
	}
	if err := checkNPMPart(base); err != nil {
		return fmt.Errorf("npm package name %q: name %v", pkg, err)
	}
	return nil
}

func checkNPMPart(s string) error {
	if s == "" {
		return fmt.Errorf("is empty")
	}
	if s[0] == '.' || s[0] == '_' {
		return fmt.Errorf("%q starts with %q", s, s[0])
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("-._~", c)) {
			return fmt.Errorf("%q has the character %q (lower-case letters, digits and - . _ ~ only)", s, c)
		}
	}
	return nil
}

// DebRelation is one version relation of a deb: source, as in a Debian
// Depends field: Op is "=", ">=", "<=", ">>" (strictly later) or "<<"
// (strictly earlier), and Version a Debian version.
type DebRelation struct {
	Op      string
	Version string
}

func (r DebRelation) String() string { return r.Op + r.Version }

// debOps are Debian's relation operators, longest first so that ">="
// is not read as ">".
var debOps = []string{">=", "<=", ">>", "<<", "="}

// DebRelations returns the version relations a deb: source states: none
// for deb:NAME (any version: apt's candidate), one "=" relation for an
// exact version (deb:NAME=VERSION), or the list deb:NAME>=A,<<B gives. It
// is nil for other kinds, and for a Source that ParseSource did not make.
func (s *Source) DebRelations() []DebRelation {
	if s.Kind != SourceDeb || s.Version == "" {
		return nil
	}
	if isDigit(s.Version[0]) {
		return []DebRelation{{Op: "=", Version: s.Version}}
	}
	rels, err := parseDebRelations(s.Version)
	if err != nil {
		return nil
	}
	return rels
}

// parseDeb reads NAME, NAME=VERSION or NAME followed by relations
// (NAME>=A,<<B). Version keeps an exact version bare, as the lock pins
// it, and a list of relations as written, starting with its operator;
// DebRelations reads either back.
func parseDeb(src *Source, rest string) error {
	src.Kind = SourceDeb
	i := strings.IndexAny(rest, "=<>")
	if i < 0 {
		i = len(rest)
	}
	pkg, rels := rest[:i], rest[i:]
	if len(pkg) < 2 || !isLowerAlnum(rune(pkg[0])) {
		return fmt.Errorf("source %q: %q is not a Debian package name; write deb:NAME, deb:NAME=VERSION or deb:NAME>=VERSION", src.Raw, pkg)
	}
	for _, c := range pkg {
		if !isLowerAlnum(c) && !strings.ContainsRune("+-.", c) {
			return fmt.Errorf("source %q: %q is not a Debian package name (lower-case letters, digits and + - . only)", src.Raw, pkg)
		}
	}
	src.Ref = pkg
	if rels == "" {
		return nil
	}
	list, err := parseDebRelations(rels)
	if err != nil {
		return fmt.Errorf("source %q: %v", src.Raw, err)
	}
	if len(list) == 1 && list[0].Op == "=" {
		src.Version = list[0].Version
	} else {
		src.Version = rels
	}
	return nil
}

// parseDebRelations reads comma-separated relations, each an operator and
// a Debian version: ">=1.35,<<1.36".
func parseDebRelations(s string) ([]DebRelation, error) {
	var list []DebRelation
	for part := range strings.SplitSeq(s, ",") {
		var op string
		for _, o := range debOps {
			if strings.HasPrefix(part, o) {
				op = o
				break
			}
		}
		v := strings.TrimPrefix(part, op)
		switch {
		case part == "":
			return nil, fmt.Errorf("an empty relation in %q; separate relations with single commas, as in >=1.35,<<1.36", s)
		case op == "" && (part[0] == '<' || part[0] == '>'):
			return nil, fmt.Errorf("%q: Debian's relations are >=, <=, >> (later), << (earlier) and =; a single < or > is not one", part)
		case op == "":
			return nil, fmt.Errorf("%q does not start with a relation (>=, <=, >>, <<, =)", part)
		case v == "":
			return nil, fmt.Errorf("%q names no version after %s", part, op)
		case strings.ContainsAny(v[:1], "=<>"):
			return nil, fmt.Errorf("%q is not a relation: Debian's relations are >=, <=, >> (later), << (earlier) and =", part)
		}
		if err := checkDebVersion(v); err != nil {
			return nil, err
		}
		list = append(list, DebRelation{Op: op, Version: v})
	}
	if len(list) > 1 {
		for _, r := range list {
			if r.Op == "=" {
				return nil, fmt.Errorf("%q: an exact version (=%s) cannot be combined with other relations", s, r.Version)
			}
		}
	}
	return list, nil
}

// checkDebVersion checks the syntax of a Debian version,
// [EPOCH:]UPSTREAM[-REVISION]: the epoch is a number, the upstream
// version starts with a digit, and only letters, digits and . + ~ (and -
// and : in the upstream version) are used.
func checkDebVersion(v string) error {
	for _, c := range v {
		if !(isLowerAlnum(c) || c >= 'A' && c <= 'Z' || strings.ContainsRune(".+~:-", c)) {
			return fmt.Errorf("the Debian version %q has the character %q", v, c)
		}
	}
	upstream := v
	if epoch, rest, ok := strings.Cut(v, ":"); ok {
		if epoch == "" || strings.Trim(epoch, "0123456789") != "" {
			return fmt.Errorf("the Debian version %q: the epoch before the colon must be a number", v)
		}
		upstream = rest
	}
	if i := strings.LastIndex(upstream, "-"); i >= 0 {
		if revision := upstream[i+1:]; revision == "" || strings.ContainsRune(revision, ':') {
			return fmt.Errorf("the Debian version %q: the revision after the last hyphen must be letters, digits and . + ~", v)
		}
		upstream = upstream[:i]
	}
	if upstream == "" || !isDigit(upstream[0]) {
		return fmt.Errorf("the Debian version %q must start with a digit (after the epoch, if any)", v)
	}
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isLowerAlnum(c rune) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

func parseFileSource(src *Source, p string) error {
	src.Kind = SourceFile
	if p == "" {
		return fmt.Errorf("source %q names no file; write file:PATH", src.Raw)
	}
	src.Ref = cleanSlashPath(p)
	return nil
}

func parseURL(src *Source, raw string) error {
	src.Kind = SourceURL
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("source %q is not a valid URL: %v", raw, err)
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("source %q has no host", raw)
	}
	if u.User != nil {
		return fmt.Errorf("source %q has credentials in the URL; sources must not carry secrets", raw)
	}
	if u.Fragment != "" {
		return fmt.Errorf("source %q has a #fragment, which is never sent to the server", raw)
	}
	src.Ref = raw
	return nil
}

// cleanSlashPath cleans a path written in a spec, keeping a relative path
// relative.
func cleanSlashPath(p string) string { return filepath.Clean(p) }

// IsLocal reports whether the source is read from the host's file system:
// a file or oci-layout source.
func (s *Source) IsLocal() bool { return s.Kind == SourceFile || s.Kind == SourceOCILayout }

// insideDir reports whether the clean path p, as a spec writes it, names
// something inside the configuration directory: relative, and not through
// "..".
func insideDir(p string) bool {
	return !filepath.IsAbs(p) && p != ".." && !strings.HasPrefix(p, ".."+string(filepath.Separator))
}

// within reports whether the clean absolute path p is dir or below it.
func within(p, dir string) bool {
	if dir == string(filepath.Separator) {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// absIn makes the clean path p absolute against dir.
func absIn(dir, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}

// LocalRoot says where a file or oci-layout source is read: root is the
// directory every read of it is confined to — configDir, or the image's
// host_paths entry HostPath names (made absolute against configDir) — and
// rel its path inside root, without "..". Readers open root with
// os.OpenRoot and rel inside it, so that neither ".." nor a symbolic link
// leads out of root. It is an error for a source of another kind, and for
// a path that lies outside root (a Source not made by Load).
func (s *Source) LocalRoot(configDir string) (root, rel string, err error) {
	if !s.IsLocal() {
		return "", "", fmt.Errorf("source %q is not read from the host's file system", s.Raw)
	}
	if s.HostPath == "" {
		if !insideDir(s.Ref) {
			return "", "", fmt.Errorf("source %q names %s, outside the configuration directory; list the directory holding it in the image's host_paths to read it", s.Raw, s.Ref)
		}
		return configDir, s.Ref, nil
	}
	root = absIn(configDir, s.HostPath)
	p := absIn(configDir, s.Ref)
	if !within(p, root) {
		return "", "", fmt.Errorf("source %q names %s, which is not inside the host path %s", s.Raw, s.Ref, s.HostPath)
	}
	rel, err = filepath.Rel(root, p)
	if err != nil {
		return "", "", fmt.Errorf("source %q: %v", s.Raw, err)
	}
	return root, rel, nil
}

// isSHA256 reports whether s is 64 lower-case hex digits.
func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// archiveExts are the file name endings taken to be archives for url and
// file sources.
var archiveExts = []string{".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".tar.zst", ".tzst", ".zip", ".deb", ".apk"}

// IsArchive reports whether the source yields an archive that can be
// extracted or looked into: npm tarballs, Debian packages, OCI images, and
// url or file sources whose name ends in a known archive extension.
func (s *Source) IsArchive() bool {
	switch s.Kind {
	case SourceNPM, SourceDeb, SourceOCI, SourceOCILayout:
		return true
	case SourceURL:
		u, err := url.Parse(s.Ref)
		if err != nil {
			return false
		}
		return hasArchiveExt(u.Path)
	case SourceFile:
		return hasArchiveExt(s.Ref)
	}
	return false
}

func hasArchiveExt(p string) bool {
	p = strings.ToLower(path.Base(filepath.ToSlash(p)))
	for _, ext := range archiveExts {
		if strings.HasSuffix(p, ext) {
			return true
		}
	}
	return false
}
