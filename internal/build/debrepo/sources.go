package debrepo

import (
	"bufio"
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Source is one apt repository suite: the repository's base URI, the
// suite (a dists/ directory), its components and the keyring that signs
// it. Architectures, when set, limits which binary indexes the source
// has.
type Source struct {
	URI           string
	Suite         string
	Components    []string
	Architectures []string
	// SignedBy is the path of the keyring file that must have signed the
	// suite's InRelease; empty means the caller's default keyring.
	SignedBy string
}

// String is the source as one apt line, for messages.
func (s Source) String() string {
	return fmt.Sprintf("%s %s %s", s.URI, s.Suite, strings.Join(s.Components, " "))
}

// DefaultKeyring is the Debian archive keyring apt trusts on a Debian
// host; a source without Signed-By is checked against it unless the
// caller gives another.
const DefaultKeyring = "/usr/share/keyrings/debian-archive-keyring.gpg"

// HostSources returns the deb sources of the apt configuration under
// root ("/" for the machine's own): etc/apt/sources.list and the *.list
// and *.sources files of etc/apt/sources.list.d, in apt's order (the main
// list first, then the directory's files sorted by name). deb-src
// entries, disabled deb822 stanzas and files with other suffixes are
// left out; cdrom: and file-less schemes other than http, https and file
// are errors naming the file.
func HostSources(root string) ([]Source, error) {
	var out []Source
	main := filepath.Join(root, "etc/apt/sources.list")
	if data, err := os.ReadFile(main); err == nil {
		s, err := ParseSources(data, false)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", main, err)
		}
		out = append(out, s...)
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	dir := filepath.Join(root, "etc/apt/sources.list.d")
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		deb822 := strings.HasSuffix(n, ".sources")
		if !deb822 && !strings.HasSuffix(n, ".list") {
			continue
		}
		p := filepath.Join(dir, n)
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		s, err := ParseSources(data, deb822)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, s...)
	}
	return out, nil
}

// ParseSources parses apt sources: one-line format ("deb [opts] URI SUITE
// COMPONENT...") or, with deb822, stanzas with Types, URIs, Suites,
// Components, Architectures, Signed-By and Enabled. Each (URI, suite)
// pair becomes one Source.
func ParseSources(data []byte, deb822 bool) ([]Source, error) {
	if deb822 {
		return parseDeb822Sources(data)
	}
	var out []Source
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == "deb-src" {
			continue
		}
		if f[0] != "deb" {
			return nil, fmt.Errorf("line %d: %q is not a deb line", n, f[0])
		}
		f = f[1:]
		var s Source
		if len(f) > 0 && strings.HasPrefix(f[0], "[") {
			var opts []string
			for len(f) > 0 {
				tok := f[0]
				f = f[1:]
				opts = append(opts, strings.Trim(tok, "[]"))
				if strings.HasSuffix(tok, "]") {
					break
				}
			}
			for _, o := range opts {
				k, v, _ := strings.Cut(o, "=")
				switch k {
				case "signed-by":
					s.SignedBy = v
				case "arch":
					s.Architectures = strings.Split(v, ",")
				}
			}
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("line %d: a deb line names a URI and a suite", n)
		}
		s.URI, s.Suite, s.Components = f[0], f[1], f[2:]
		if err := checkSource(&s); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseDeb822Sources(data []byte) ([]Source, error) {
	var out []Source
	for i, stanza := range splitStanzas(string(data)) {
		f := stanzaFields(stanza)
		if len(f) == 0 {
			continue
		}
		if strings.EqualFold(f["enabled"], "no") || !slices.Contains(strings.Fields(f["types"]), "deb") {
			continue
		}
		for _, uri := range strings.Fields(f["uris"]) {
			for _, suite := range strings.Fields(f["suites"]) {
				s := Source{
					URI:           uri,
					Suite:         suite,
					Components:    strings.Fields(f["components"]),
					Architectures: strings.Fields(f["architectures"]),
					SignedBy:      strings.TrimSpace(f["signed-by"]),
				}
				if strings.Contains(s.SignedBy, "\n") || strings.Contains(s.SignedBy, "BEGIN PGP") {
					return nil, fmt.Errorf("stanza %d: an inline Signed-By key is not supported; put the key in a file and name it", i+1)
				}
				if err := checkSource(&s); err != nil {
					return nil, fmt.Errorf("stanza %d: %w", i+1, err)
				}
				out = append(out, s)
			}
		}
	}
	return out, nil
}

func checkSource(s *Source) error {
	u, err := url.Parse(s.URI)
	if err != nil {
		return fmt.Errorf("URI %q: %v", s.URI, err)
	}
	switch u.Scheme {
	case "http", "https", "file":
	default:
		return fmt.Errorf("URI %q: only http, https and file repositories are read", s.URI)
	}
	if strings.HasSuffix(s.Suite, "/") {
		return fmt.Errorf("suite %q is a flat repository, which is not supported", s.Suite)
	}
	if len(s.Components) == 0 {
		return fmt.Errorf("%s %s names no component", s.URI, s.Suite)
	}
	s.URI = strings.TrimSuffix(s.URI, "/")
	return nil
}

// splitStanzas splits control-format text at blank lines, dropping
// comment lines.
func splitStanzas(s string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.TrimSpace(line) == "" {
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// stanzaFields reads one stanza's fields, lower-cased names to values;
// continuation lines are joined with newlines.
func stanzaFields(stanza string) map[string]string {
	f := map[string]string{}
	last := ""
	for _, line := range strings.Split(strings.TrimSuffix(stanza, "\n"), "\n") {
		if (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) && last != "" {
			f[last] += "\n" + strings.TrimSpace(line)
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		last = strings.ToLower(strings.TrimSpace(k))
		f[last] = strings.TrimSpace(v)
	}
	return f
}
