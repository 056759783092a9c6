package lang

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// ImagePackages is an image's package set: the Debian packages `sbx lock`
// resolves with their dependency closure and pins, and the executables
// the build checks.
type ImagePackages struct {
	// Requests are the packages as written: "NAME", "NAME=VERSION" or
	// "NAME (OP VERSION)" with OP one of <<, <=, =, >=, >>.
	Requests []string
	// Repositories are apt source lines ("deb [signed-by=KEYRING] URI
	// SUITE COMPONENT…") that replace the host's apt sources; empty means
	// the host's. For an Alpine base they are repository URLs, as
	// /etc/apk/repositories lists them, that replace the base's.
	Repositories []string
	// Keyring is the keyring file that signs repositories without their
	// own signed-by; empty means the Debian archive keyring of the host.
	// For an Alpine base it is an RSA public key file (NAME.rsa.pub) or a
	// directory of them that replaces the base's /etc/apk/keys.
	Keyring string
	// Executables are commands (names looked up in /usr/local/sbin,
	// /usr/local/bin, /usr/sbin, /usr/bin, /sbin, /bin, or absolute
	// paths) the build checks are present, executable and have their
	// ELF interpreter and libraries in the image.
	Executables []string
	Range       hcl.Range
}

// decodePackages reads packages, repositories, keyring and executables.
func (l *loader) decodePackages(img *Image, attrs hcl.Attributes) {
	p := &img.Packages
	if a := attrs["packages"]; a != nil {
		p.Range = a.Expr.Range()
		items, _ := l.attrStrings(a)
		seen := map[string]bool{}
		for _, it := range items {
			name, ok := packageRequestName(it.Value)
			switch {
			case !ok:
				l.errorf(it.Range, "Invalid package", "%q is not a package request: write NAME, NAME=VERSION or \"NAME (>= VERSION)\" (relations <<, <=, =, >=, >>), with a Debian package name (lower-case letters, digits, +, - and .).", it.Value)
			case seen[name]:
				l.errorf(it.Range, "Duplicate package", "%s is listed twice; give it once, with the version relation it needs.", name)
			default:
				seen[name] = true
				p.Requests = append(p.Requests, strings.TrimSpace(it.Value))
			}
		}
	}
	if a := attrs["repositories"]; a != nil {
		items, _ := l.attrStrings(a)
		kinds := map[bool]bool{}
		for _, it := range items {
			f := strings.Fields(it.Value)
			apk := apkRepositoryLine(it.Value)
			if !apk && (len(f) < 4 || f[0] != "deb" || strings.ContainsRune(it.Value, '\n')) {
				l.errorf(it.Range, "Invalid repository", "A repository is an apt source line, \"deb [signed-by=KEYRING] URI SUITE COMPONENT…\", or, for an Alpine image, a repository URL as /etc/apk/repositories has it (\"https://HOST/alpine/v3.20/main\", optionally after \"@TAG \").")
				continue
			}
			kinds[apk] = true
			if len(kinds) > 1 {
				l.errorf(it.Range, "Mixed repositories", "An image's repositories are all apt source lines (a Debian base) or all Alpine repository URLs (an Alpine base), not both.")
				continue
			}
			p.Repositories = append(p.Repositories, it.Value)
		}
		if len(p.Requests) == 0 {
			l.errorf(a.Expr.Range(), "Repositories without packages", "repositories is where packages come from; the image has no packages.")
		}
	}
	if a := attrs["keyring"]; a != nil {
		if s, ok := l.attrString(a); ok {
			if s == "" || strings.ContainsRune(s, 0) {
				l.errorf(a.Expr.Range(), "Invalid keyring", "keyring is the path of an OpenPGP keyring file.")
			} else {
				p.Keyring = s
			}
		}
	}
	if a := attrs["executables"]; a != nil {
		items, _ := l.attrStrings(a)
		for _, it := range items {
			v := it.Value
			bad := v == "" || strings.ContainsAny(v, "\x00 \t\n")
			if strings.HasPrefix(v, "/") {
				bad = bad || checkGuestPath(v) != nil
			} else {
				bad = bad || strings.Contains(v, "/")
			}
			if bad {
				l.errorf(it.Range, "Invalid executable", "%q is neither a command name nor an absolute, clean path in the image.", v)
				continue
			}
			p.Executables = append(p.Executables, v)
		}
	}
}

// apkRepositoryLine reports whether s is a line of /etc/apk/repositories:
// an http, https or file URL, optionally after "@TAG". The URL is parsed
// again, fully, when the lock reads it.
func apkRepositoryLine(s string) bool {
	f := strings.Fields(s)
	if len(f) == 2 && len(f[0]) > 1 && strings.HasPrefix(f[0], "@") {
		f = f[1:]
	}
	if len(f) != 1 || strings.ContainsAny(s, "\n\x00") {
		return false
	}
	for _, scheme := range []string{"https://", "http://", "file:///"} {
		if strings.HasPrefix(f[0], scheme) && len(f[0]) > len(scheme) {
			return true
		}
	}
	return false
}

// packageRequestName returns the package name of a request and whether
// the request is well formed. Versions are checked again, fully, when the
// lock resolves them.
func packageRequestName(s string) (string, bool) {
	t := strings.TrimSpace(s)
	i := strings.IndexAny(t, "<>=( ")
	name, rest := t, ""
	if i >= 0 {
		name, rest = t[:i], strings.TrimSpace(t[i:])
	}
	if !debPackageName(name) {
		return "", false
	}
	if rest == "" {
		return name, true
	}
	if strings.HasPrefix(rest, "(") != strings.HasSuffix(rest, ")") {
		return "", false
	}
	rest = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(rest, "("), ")"))
	for _, op := range []string{"<<", "<=", ">=", ">>", "="} {
		if v, ok := strings.CutPrefix(rest, op); ok {
			v = strings.TrimSpace(v)
			return name, v != "" && !strings.ContainsAny(v, " ()<>=,|") && v[0] >= '0' && v[0] <= '9'
		}
	}
	return "", false
}

func debPackageName(s string) bool {
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
