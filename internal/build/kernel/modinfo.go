package kernel

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"strings"
)

var elfMagic = []byte(elf.ELFMAG)

// modinfo is a module's .modinfo section: "key=value" strings.
type modinfo [][2]string

func (mi modinfo) first(key string) string {
	for _, kv := range mi {
		if kv[0] == key {
			return kv[1]
		}
	}
	return ""
}

func (mi modinfo) all(key string) []string {
	var out []string
	for _, kv := range mi {
		if kv[0] == key {
			out = append(out, kv[1])
		}
	}
	return out
}

// readModinfo reads the .modinfo section of a kernel module (an ELF
// relocatable object).
func readModinfo(b []byte) (modinfo, error) {
	if !bytes.HasPrefix(b, elfMagic) {
		return nil, errors.New("not a kernel module: no ELF header")
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("not a kernel module: %w", err)
	}
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, errors.New("not a kernel module: no .modinfo section")
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf(".modinfo: %w", err)
	}
	var mi modinfo
	for _, s := range bytes.Split(data, []byte{0}) {
		if k, v, ok := strings.Cut(string(s), "="); ok {
			mi = append(mi, [2]string{k, v})
		}
	}
	return mi, nil
}

// parseBuiltinModinfo reads modules.builtin.modinfo ("name.key=value"
// strings) into the aliases of each built-in module.
func parseBuiltinModinfo(b []byte) map[string][]string {
	out := map[string][]string{}
	for _, s := range bytes.Split(b, []byte{0}) {
		kv, v, ok := strings.Cut(string(s), "=")
		if !ok {
			continue
		}
		name, key, ok := strings.Cut(kv, ".")
		if !ok {
			continue
		}
		name = canonical(name)
		if _, seen := out[name]; !seen {
			out[name] = nil
		}
		if key == "alias" {
			out[name] = append(out[name], v)
		}
	}
	return out
}

// wantSet is the set of module names and aliases whose bytes Load keeps:
// the names asked for and, as their modules go by, their dependencies.
type wantSet map[string]bool

func newWantSet(names []string) wantSet {
	w := wantSet{}
	for _, n := range names {
		w[n] = true
		w[canonical(n)] = true
	}
	return w
}

// wants reports whether m is wanted, and if so adds its dependencies.
func (w wantSet) wants(m *Module) bool {
	hit := w[m.Name]
	for _, a := range m.Aliases {
		hit = hit || w[a]
	}
	if !hit {
		return false
	}
	for _, list := range [][]string{m.Depends, m.SoftPre, m.SoftPost} {
		for _, d := range list {
			w[d] = true
			w[canonical(d)] = true
		}
	}
	return true
}
