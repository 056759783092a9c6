package apkrepo

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/layers"
)

// Paths of apk's database in a root file system.
const (
	InstalledPath    = "/lib/apk/db/installed"
	WorldPath        = "/etc/apk/world"
	RepositoriesPath = "/etc/apk/repositories"
	KeysDir          = "/etc/apk/keys"
	ArchPath         = "/etc/apk/arch"
)

// Script is a package script Install did not run.
type Script struct {
	Package string // "name-version"
	// Name is the control entry (".post-install", ".trigger"…).
	Name string
}

// Result is what Install did not do.
type Result struct {
	// NotRun lists every script of the installed packages, sorted by
	// package and name: none is run.
	NotRun []Script
	// Triggers lists the trigger directories the packages declared, by
	// package ("busybox: /bin /sbin"); their trigger scripts are in NotRun.
	Triggers []string
}

// Install unpacks the data segments of pkgs into tree, sorted by
// package name, without running any script, and records them as apk
// does: a record per package in /lib/apk/db/installed (the header fields
// from the verified .PKGINFO and the pin, then F:/M:/R:/a:/Z: lines for
// every directory and file, so that apk info, apk info -L and apk audit
// in the guest see them) after the base image's records, and world, the
// union of the base's /etc/apk/world and the given constraints, sorted,
// one a line. Each .apk is verified again (signature by a key in keys,
// identity against the pin, data hash) before anything is unpacked. A
// package that replaces a base package of its name drops that record,
// and the base package's files the new one does not ship are removed.
// Setuid and setgid bits and extended attributes are dropped and device
// nodes left out, as for extracted artifacts; an entry that escapes the
// root is an error naming the package. The same inputs give the same tree.
func Install(ctx context.Context, tree *layers.Tree, keys Keys, pkgs []Fetched, world []string) (*Result, error) {
	for _, w := range world {
		if _, err := ParseDep(w); err != nil {
			return nil, fmt.Errorf("world: %w", err)
		}
	}
	pkgs = append([]Fetched(nil), pkgs...)
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Pin.Name < pkgs[j].Pin.Name })
	var base []*Package
	if r, err := tree.Open(usrMerged(tree, InstalledPath[1:])); err == nil {
		base, err = ParseInstalled(r)
		if err != nil {
			return nil, fmt.Errorf("the base image's %s: %w", InstalledPath, err)
		}
	}
	baseByName := map[string]*Package{}
	for _, p := range base {
		baseByName[p.Name] = p
	}
	res := &Result{}
	var records []string
	replaced := map[string]bool{}
	for _, f := range pkgs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		what := fmt.Sprintf("package %s-%s", f.Pin.Name, f.Pin.Version)
		data, err := os.ReadFile(f.Path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		v, err := VerifyPackage(data, keys, f.Pin.Identity, what)
		if err != nil {
			return nil, err
		}
		if v.Info["pkgname"] != f.Pin.Name || v.Info["pkgver"] != f.Pin.Version {
			return nil, fmt.Errorf("%s: its .PKGINFO says %s-%s", what, v.Info["pkgname"], v.Info["pkgver"])
		}
		files, err := unpack(ctx, tree, v.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if old := baseByName[f.Pin.Name]; old != nil {
			replaced[old.Name] = true
			if err := removeStale(tree, old, files); err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
		}
		records = append(records, installedRecord(f.Pin, v, files))
		for _, n := range sortedKeys(v.Scripts) {
			res.NotRun = append(res.NotRun, Script{Package: f.Pin.Name + "-" + f.Pin.Version, Name: n})
		}
		if t := v.Info["triggers"]; t != "" {
			res.Triggers = append(res.Triggers, f.Pin.Name+": "+t)
		}
	}
	var db strings.Builder
	for _, p := range base {
		if replaced[p.Name] {
			continue
		}
		db.WriteString(p.raw)
		db.WriteString("\n")
	}
	for _, rec := range records {
		db.WriteString(rec)
		db.WriteString("\n")
	}
	if err := putFile(tree, usrMerged(tree, InstalledPath[1:]), db.String()); err != nil {
		return nil, err
	}
	if err := writeWorld(tree, world); err != nil {
		return nil, err
	}
	return res, nil
}

func writeWorld(tree *layers.Tree, world []string) error {
	set := map[string]bool{}
	if r, err := tree.Open(WorldPath); err == nil {
		old, err := io.ReadAll(io.LimitReader(r, 1<<20))
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(old)) {
			set[f] = true
		}
	}
	for _, w := range world {
		set[w] = true
	}
	var b strings.Builder
	for _, w := range sortedKeys(set) {
		b.WriteString(w)
		b.WriteByte('\n')
	}
	return putFile(tree, WorldPath, b.String())
}

// dbDir is one directory a package owns or places files in, as the
// installed database lists it.
type dbDir struct {
	name     string // relative, "" for the root
	acl      string // "uid:gid:mode" when not 0:0:755, for M:
	explicit bool
	files    []dbFile
}

type dbFile struct {
	name string
	acl  string // "uid:gid:mode" when not 0:0:644, for a:
	sum  string // Z: Q1 SHA-1 of the content, or of a symlink's target
}

type unpacked struct {
	dirs  []*dbDir
	paths map[string]bool // every path, relative
}

// unpack adds a data segment's entries to tree and returns what the
// installed database records of them.
func unpack(ctx context.Context, tree *layers.Tree, data []byte) (*unpacked, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("data segment: %w", err)
	}
	defer zr.Close()
	u := &unpacked{paths: map[string]bool{}}
	byDir := map[string]*dbDir{}
	dirOf := func(name string, explicit bool) *dbDir {
		d := byDir[name]
		if d == nil {
			d = &dbDir{name: name}
			byDir[name] = d
			u.dirs = append(u.dirs, d)
		}
		d.explicit = d.explicit || explicit
		return d
	}
	type hardLink struct {
		e   layers.Entry
		rel string
	}
	var links []hardLink
	tr := tar.NewReader(zr)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("data segment: %w", err)
		}
		if hdr.Typeflag == tar.TypeXHeader || hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		hdr.Name = archive.CleanName(hdr.Name)
		if hdr.Typeflag == tar.TypeLink {
			hdr.Linkname = archive.CleanName(hdr.Linkname)
		}
		if err := archive.CheckEntry(hdr); err != nil {
			return nil, fmt.Errorf("unsafe entry: %w", err)
		}
		rel := hdr.Name
		if rel == "." || strings.HasPrefix(rel, ".") && !strings.Contains(rel, "/") {
			// apk skips top-level dot entries of the data segment.
			continue
		}
		mode := hdr.Mode & 0o1777
		e := layers.Entry{Path: usrMerged(tree, rel), Type: hdr.Typeflag, Mode: mode, UID: hdr.Uid, GID: hdr.Gid, Linkname: hdr.Linkname}
		old, exists := tree.Lookup(e.Path)
		if exists && old.Type == tar.TypeDir && e.Type != tar.TypeDir {
			return nil, fmt.Errorf("entry %q is a %s, but %s is a directory in the image", hdr.Name, layers.TypeName(e.Type), e.Path)
		}
		acl := fmt.Sprintf("%d:%d:%o", hdr.Uid, hdr.Gid, mode)
		switch e.Type {
		case tar.TypeDir:
			d := dirOf(rel, true)
			if acl != "0:0:755" {
				d.acl = acl
			}
			u.paths[rel] = true
			if exists && (old.Type == tar.TypeDir || old.Type == tar.TypeSymlink) {
				// A directory already there (or a link standing for one)
				// is kept as it is, as apk keeps it.
				continue
			}
			if err := tree.Add(e, nil); err != nil {
				return nil, fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
			continue
		case tar.TypeChar, tar.TypeBlock:
			continue
		}
		dir, name := path.Split(rel)
		d := dirOf(strings.TrimSuffix(dir, "/"), false)
		f := dbFile{name: name}
		if acl != "0:0:644" {
			f.acl = acl
		}
		u.paths[rel] = true
		var h hash.Hash = sha1.New()
		switch e.Type {
		case tar.TypeReg:
			e.Size = hdr.Size
			if err := tree.Add(e, io.TeeReader(tr, h)); err != nil {
				return nil, fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
		case tar.TypeSymlink:
			h.Write([]byte(hdr.Linkname))
			if err := tree.Add(e, nil); err != nil {
				return nil, fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
		case tar.TypeLink:
			e.Linkname = usrMerged(tree, hdr.Linkname)
			links = append(links, hardLink{e, rel})
			h = nil
		case tar.TypeFifo:
			h = nil
			if err := tree.Add(e, nil); err != nil {
				return nil, fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
		default:
			return nil, fmt.Errorf("entry %q: unsupported entry type %q", hdr.Name, hdr.Typeflag)
		}
		if h != nil {
			f.sum = "Q1" + base64.StdEncoding.EncodeToString(h.Sum(nil))
		}
		d.files = append(d.files, f)
	}
	for _, l := range links {
		if err := tree.Add(l.e, nil); err != nil {
			return nil, fmt.Errorf("entry %q: %w", l.rel, err)
		}
		// A hard link's Z: is its target's content's.
		target, err := tree.Open(l.e.Linkname)
		if err != nil {
			continue
		}
		h := sha1.New()
		if _, err := io.Copy(h, target); err != nil {
			return nil, err
		}
		dir, name := path.Split(l.rel)
		d := byDir[strings.TrimSuffix(dir, "/")]
		for i := range d.files {
			if d.files[i].name == name {
				d.files[i].sum = "Q1" + base64.StdEncoding.EncodeToString(h.Sum(nil))
			}
		}
	}
	return u, nil
}

// usrMerged maps a package path (relative) to its place in the tree: a
// path under a top-level directory that the base image has as a link to
// usr/NAME (a merged-/usr layout) is written under /usr/NAME, since the
// tree never follows links. The directory itself stays the link.
func usrMerged(tree *layers.Tree, rel string) string {
	top, sub, ok := strings.Cut(rel, "/")
	if !ok || sub == "" {
		return "/" + rel
	}
	if e, ok := tree.Lookup("/" + top); ok && e.Type == tar.TypeSymlink && (e.Linkname == "usr/"+top || e.Linkname == "/usr/"+top) {
		return "/usr/" + top + "/" + sub
	}
	return "/" + rel
}

// removeStale removes the files of a replaced base package that the new
// package does not ship. Directories stay (other packages may use them).
func removeStale(tree *layers.Tree, old *Package, now *unpacked) error {
	for _, f := range old.files {
		if now.paths[f] {
			continue
		}
		p := usrMerged(tree, f)
		if e, ok := tree.Lookup(p); ok && e.Type != tar.TypeDir {
			if err := tree.Remove(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// installedRecord writes a package's installed-database record: the
// index fields apk writes, then its directories and files.
func installedRecord(pin Pin, v *Verified, u *unpacked) string {
	info := v.Info
	var b strings.Builder
	field := func(k byte, val string) {
		if val != "" {
			fmt.Fprintf(&b, "%c:%s\n", k, val)
		}
	}
	field('C', v.Identity)
	field('P', pin.Name)
	field('V', pin.Version)
	field('A', info["arch"])
	field('S', fmt.Sprint(pin.Size))
	field('I', info["size"])
	field('T', info["pkgdesc"])
	field('U', info["url"])
	field('L', info["license"])
	field('o', info["origin"])
	field('m', info["maintainer"])
	field('t', info["builddate"])
	field('c', info["commit"])
	field('k', info["provider_priority"])
	field('D', info["depend"])
	field('p', info["provides"])
	field('i', info["install_if"])
	field('r', info["replaces"])
	for _, d := range u.dirs {
		if d.name != "" {
			field('F', d.name)
			field('M', d.acl)
		}
		for _, f := range d.files {
			field('R', f.name)
			field('a', f.acl)
			field('Z', f.sum)
		}
	}
	return b.String()
}

func putFile(tree *layers.Tree, p, content string) error {
	return tree.Add(layers.Entry{Path: p, Type: tar.TypeReg, Mode: 0o644, Size: int64(len(content))}, strings.NewReader(content))
}

// ReadBase reads what a base image says about apk from its tree: the
// repositories, the trusted keys, the architecture, the installed
// packages and the world. Missing files give empty values; a file that
// does not parse is an error naming it.
func ReadBase(tree *layers.Tree) (*Base, error) {
	b := &Base{Keys: Keys{}}
	read := func(p string) ([]byte, bool, error) {
		e, ok := tree.Lookup(p)
		if !ok || e.Type != tar.TypeReg {
			return nil, false, nil
		}
		r, err := tree.Open(p)
		if err != nil {
			return nil, false, err
		}
		data, err := io.ReadAll(io.LimitReader(r, 64<<20))
		return data, true, err
	}
	if data, ok, err := read(RepositoriesPath); err != nil {
		return nil, err
	} else if ok {
		if b.Repositories, err = ParseRepositories(data); err != nil {
			return nil, fmt.Errorf("%s: %w", RepositoriesPath, err)
		}
	}
	if data, ok, err := read(ArchPath); err != nil {
		return nil, err
	} else if ok {
		b.Arch = strings.TrimSpace(string(data))
	}
	if data, ok, err := read(usrMerged(tree, InstalledPath[1:])); err != nil {
		return nil, err
	} else if ok {
		if b.Installed, err = ParseInstalled(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("%s: %w", InstalledPath, err)
		}
	}
	if data, ok, err := read(WorldPath); err != nil {
		return nil, err
	} else if ok {
		b.World = strings.Fields(string(data))
	}
	for _, p := range tree.Paths() {
		name, ok := strings.CutPrefix(p, KeysDir+"/")
		if !ok || strings.Contains(name, "/") {
			continue
		}
		data, ok, err := read(p)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		k, err := ParseKey(data)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", p, err)
		}
		b.Keys[name] = k
	}
	return b, nil
}

// Base is what a base image's apk files say.
type Base struct {
	Repositories []Repository
	Keys         Keys
	Arch         string
	Installed    []*Package
	World        []string
}
