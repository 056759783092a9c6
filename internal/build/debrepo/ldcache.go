package debrepo

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"path"
	"sort"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/layers"
)

// ldArch describes a Debian architecture to the dynamic loader: its
// multiarch directory and the flags its ld.so.cache entries carry (the
// loader ignores entries whose flags are not its own).
var ldArch = map[string]struct {
	triplet string
	flags   int32
}{
	// FLAG_ELF_LIBC6 (3) | FLAG_X8664_LIB64 (0x0300).
	"amd64": {"x86_64-linux-gnu", 0x0303},
	// FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64 (0x0a00).
	"arm64": {"aarch64-linux-gnu", 0x0a03},
}

// LDCache writes /etc/ld.so.cache for the Debian architecture arch, as
// ldconfig would for the libraries the tree holds: every ELF shared
// object in the directories of /etc/ld.so.conf.d/*.conf, the multiarch
// directories and /lib and /usr/lib that is present under its own soname
// (links resolved inside the tree), the first directory winning for a
// soname. It does not create soname links (Debian packages ship them).
// For an architecture it does not know it writes nothing: the loader
// then searches its default directories, which is slower but works for
// libraries there. The file is the "glibc-ld.so.cache1.1" format, little
// endian, entries in the loader's search order.
func LDCache(tree *layers.Tree, arch string) error {
	la, ok := ldArch[arch]
	if !ok {
		return nil
	}
	dirs := ldConfDirs(tree)
	dirs = append(dirs, "/lib/"+la.triplet, "/usr/lib/"+la.triplet, "/lib", "/usr/lib")
	type entry struct{ key, value string }
	var entries []entry
	seen := map[string]bool{}
	seenDir := map[string]bool{}
	paths := tree.Paths()
	for _, d := range dirs {
		real, ok := resolveIn(tree, d)
		if !ok || seenDir[real] {
			continue
		}
		seenDir[real] = true
		prefix := real + "/"
		for _, p := range paths {
			name, ok := strings.CutPrefix(p, prefix)
			if !ok || strings.Contains(name, "/") || !strings.HasPrefix(name, "lib") || !strings.Contains(name, ".so") || seen[name] {
				continue
			}
			target, ok := resolveIn(tree, p)
			if !ok {
				continue
			}
			if soname(tree, target) != name {
				continue
			}
			seen[name] = true
			entries = append(entries, entry{name, d + "/" + name})
		}
	}
	// The loader binary-searches entries in descending _dl_cache_libcmp
	// order.
	sort.SliceStable(entries, func(i, j int) bool { return libcmp(entries[i].key, entries[j].key) > 0 })

	const headerSize, entrySize = 48, 24
	var strs bytes.Buffer
	base := uint32(headerSize + entrySize*len(entries))
	off := map[string]uint32{}
	str := func(s string) uint32 {
		if o, ok := off[s]; ok {
			return o
		}
		o := base + uint32(strs.Len())
		strs.WriteString(s)
		strs.WriteByte(0)
		off[s] = o
		return o
	}
	var b bytes.Buffer
	b.WriteString("glibc-ld.so.cache1.1")
	le := binary.LittleEndian
	var hdr [28]byte
	le.PutUint32(hdr[0:], uint32(len(entries)))
	// hdr[4:8] is len_strings, filled in below; hdr[8] the endianness
	// flag (2, little); extension_offset and unused stay 0.
	hdr[8] = 2
	var ents bytes.Buffer
	for _, e := range entries {
		var rec [entrySize]byte
		le.PutUint32(rec[0:], uint32(la.flags))
		le.PutUint32(rec[4:], str(e.key))
		le.PutUint32(rec[8:], str(e.value))
		ents.Write(rec[:])
	}
	le.PutUint32(hdr[4:], uint32(strs.Len()))
	b.Write(hdr[:])
	b.Write(ents.Bytes())
	b.Write(strs.Bytes())
	return tree.Add(layers.Entry{Path: "/etc/ld.so.cache", Type: tar.TypeReg, Mode: 0o644, Size: int64(b.Len())}, bytes.NewReader(b.Bytes()))
}

// ldConfDirs reads the directories of /etc/ld.so.conf.d/*.conf in the
// tree, in file name order ("include" lines are those files).
func ldConfDirs(tree *layers.Tree) []string {
	var dirs []string
	for _, p := range tree.Paths() {
		if !strings.HasPrefix(p, "/etc/ld.so.conf.d/") || !strings.HasSuffix(p, ".conf") {
			continue
		}
		r, err := tree.Open(p)
		if err != nil {
			continue
		}
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(r); err != nil {
			continue
		}
		for _, line := range strings.Split(buf.String(), "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "/") && !strings.ContainsAny(line, " \t") {
				dirs = append(dirs, path.Clean(line))
			}
		}
	}
	return dirs
}

// soname returns the DT_SONAME of the shared object at p, or "".
func soname(tree *layers.Tree, p string) string {
	e, ok := tree.Lookup(p)
	if !ok || e.Type != tar.TypeReg || e.Size < 64 || e.Size > 1<<30 {
		return ""
	}
	r, err := tree.Open(p)
	if err != nil {
		return ""
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		return ""
	}
	f, err := elf.NewFile(bytes.NewReader(buf.Bytes()))
	if err != nil || f.Type != elf.ET_DYN {
		return ""
	}
	names, err := f.DynString(elf.DT_SONAME)
	if err != nil || len(names) == 0 {
		return ""
	}
	return names[0]
}

// resolveIn follows symbolic links in p inside the tree, at most 40.
func resolveIn(tree *layers.Tree, p string) (string, bool) {
	links := 0
	rest := strings.Split(strings.TrimPrefix(path.Clean("/"+p), "/"), "/")
	cur := "/"
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		if c == "" || c == "." {
			continue
		}
		next := path.Join(cur, c)
		e, ok := tree.Lookup(next)
		if !ok {
			return "", false
		}
		if e.Type == tar.TypeSymlink {
			if links++; links > 40 {
				return "", false
			}
			t := e.Linkname
			if !strings.HasPrefix(t, "/") {
				t = path.Join(cur, t)
			}
			rest = append(strings.Split(strings.TrimPrefix(path.Clean(t), "/"), "/"), rest...)
			cur = "/"
			continue
		}
		cur = next
	}
	return cur, true
}

// libcmp is glibc's _dl_cache_libcmp: runs of digits compare as numbers,
// and a digit sorts after any other character.
func libcmp(a, b string) int {
	i, j := 0, 0
	for i < len(a) {
		ca := a[i]
		var cb byte
		if j < len(b) {
			cb = b[j]
		}
		switch {
		case isDigit(ca) && isDigit(cb):
			v1, v2 := 0, 0
			for i < len(a) && isDigit(a[i]) {
				v1 = v1*10 + int(a[i]-'0')
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				v2 = v2*10 + int(b[j]-'0')
				j++
			}
			if v1 != v2 {
				return v1 - v2
			}
		case isDigit(ca):
			return 1
		case isDigit(cb):
			return -1
		case ca != cb:
			return int(ca) - int(cb)
		default:
			i++
			j++
		}
	}
	if j < len(b) {
		return -int(b[j])
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
