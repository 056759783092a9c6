package kernel

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/ctxio"
)

// DefaultImage is the glob the kernel image is found by when the spec
// names none.
const DefaultImage = "boot/vmlinuz-*"

// DefaultModules are the modules every sbx guest loads (or finds built
// in): the virtio transport and devices (disk, network, the serial ports
// of the agent and the file server, entropy, the balloon through which
// the guest returns the memory it frees), overlay and ext4 for the root
// filesystem, 9p with its fd transport for host directories, and fuse.
var DefaultModules = []string{
	"virtio_pci", "virtio_blk", "virtio_net", "virtio_console", "virtio_rng", "virtio_balloon",
	"overlay", "ext4",
	"9pnet", "9pnet_fd", "9p",
	"fuse", "virtiofs",
}

// Kernel is a kernel read from a kernel package.
type Kernel struct {
	// Version is the kernel release, the name of its modules directory
	// ("6.1.0-57-amd64").
	Version string
	// ImageName is the image's path in the archive
	// ("boot/vmlinuz-6.1.0-57-amd64"); Image its bytes.
	ImageName string
	Image     []byte
	// ModulesDir is the modules directory's path in the archive
	// ("lib/modules/6.1.0-57-amd64"). Module paths are relative to it, as
	// they are to /lib/modules/Version in the guest.
	ModulesDir string
	// Modules are the module files, by name.
	Modules map[string]*Module
	// Builtin holds the names of the modules compiled into the image.
	Builtin map[string]bool
	// Archive is the path Load read.
	Archive string

	builtinAliases map[string]string   // alias → built-in module
	aliases        map[string][]string // alias → module names, sorted
	data           map[string][]byte   // decompressed bytes kept by Load
}

// Module is one loadable module file.
type Module struct {
	// Name is the module's name, with "_" for "-" as the kernel spells it
	// ("virtio_rng" for virtio-rng.ko).
	Name string
	// Path is the file's path under the modules directory, as stored
	// ("kernel/drivers/char/hw_random/virtio-rng.ko.xz").
	Path string
	// Compression is how the file is stored; ReadModules decompresses.
	Compression archive.Compression
	// Size is the decompressed size in bytes.
	Size int64
	// Depends are the modules that must be loaded first (from modules.dep
	// when the archive has one, else the module's depends= field).
	Depends []string
	// SoftPre and SoftPost are its soft dependencies, loaded before and
	// after it when present; they may be aliases.
	SoftPre, SoftPost []string
	// Aliases are other names the module answers to ("fs-ext4").
	Aliases []string
}

// File is where the decompressed module goes under the modules directory:
// Path without its compression suffix.
func (m *Module) File() string {
	return strings.TrimSuffix(m.Path, m.Compression.Ext())
}

// Options adjust Load.
type Options struct {
	// Image is the glob naming the kernel image in the archive (the spec's
	// kernel "file"); "" means DefaultImage.
	Image string
	// Modules are names that Closure will be asked for beyond
	// DefaultModules. Load keeps the bytes of every module in the closure
	// of DefaultModules and Modules, so ReadModules, asked for that
	// closure, does not read the archive again.
	Modules []string
	// TempDir is where Load spills the bytes of modules it passes before
	// it knows whether the closure needs them; "" means os.TempDir(). The
	// file is removed before Load returns. It may grow to the modules'
	// decompressed size (about 380 MB for Debian's generic kernel). When
	// no file can be written there, Load keeps only the modules it knows
	// it needs as it passes them, and ReadModules reads the archive again
	// for the rest.
	TempDir string
}

// MetaPackageError says the archive is a Debian meta package: it holds no
// kernel and depends on the package that does.
type MetaPackageError struct {
	Archive          string
	Package, Version string // the meta package
	Target           string // the versioned package it depends on
	TargetVersion    string // the exact version it requires, if any
}

func (e *MetaPackageError) Error() string {
	src := "deb:" + e.Target
	if e.TargetVersion != "" {
		src += "=" + e.TargetVersion
	}
	return fmt.Sprintf("%s is the meta package %s %s, which holds no kernel; name the package it depends on: source = %q",
		e.Archive, e.Package, e.Version, src)
}

var modulePath = regexp.MustCompile(`^(?:usr/)?lib/modules/([^/]+)/(.+)$`)

// Load reads the kernel package at path (a .deb, .apk or tar; see package
// archive): the image, the modules directory and every module's metadata.
// It fails, naming the archive, when there is no image or more than one,
// no modules (a kernel source without modules cannot serve a guest), or
// modules for more than one kernel version. When ctx ends it stops
// before the next archive entry or chunk of the file and returns an
// error wrapping ctx's.
func Load(ctx context.Context, path string, opts Options) (*Kernel, error) {
	imageGlob := strings.TrimLeft(opts.Image, "/")
	if imageGlob == "" {
		imageGlob = DefaultImage
	}
	if _, err := pathMatch(imageGlob, ""); err != nil {
		return nil, fmt.Errorf("kernel image pattern %q: %w", opts.Image, err)
	}
	type dir struct {
		mods                   map[string]*Module
		dep, builtin, bmodinfo []byte
		hasDep                 bool
		prefix                 string
	}
	var (
		images = map[string][]byte{}
		dirs   = map[string]*dir{}
		want   = newWantSet(append(append([]string(nil), DefaultModules...), opts.Modules...))
		data   = map[string][]byte{}
		sp     = &spill{dir: opts.TempDir}
	)
	defer sp.close()
	err := walk(ctx, path, func(h *tar.Header, body io.Reader) error {
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		if ok, _ := pathMatch(imageGlob, h.Name); ok {
			b, err := io.ReadAll(body)
			if err != nil {
				return fmt.Errorf("archive %s: %s: %w", path, h.Name, err)
			}
			images[h.Name] = b
			return nil
		}
		m := modulePath.FindStringSubmatch(h.Name)
		if m == nil {
			return nil
		}
		ver, rel := m[1], m[2]
		d := dirs[ver]
		if d == nil {
			d = &dir{mods: map[string]*Module{}, prefix: strings.TrimSuffix(h.Name, rel)}
			dirs[ver] = d
		}
		var err error
		switch {
		case rel == "modules.dep":
			d.dep, err = io.ReadAll(body)
			d.hasDep = true
		case rel == "modules.builtin":
			d.builtin, err = io.ReadAll(body)
		case rel == "modules.builtin.modinfo":
			d.bmodinfo, err = io.ReadAll(body)
		case isModuleFile(rel):
			var mod *Module
			var b []byte
			mod, b, err = readModule(rel, body)
			if err == nil {
				if old, dup := d.mods[mod.Name]; dup {
					return fmt.Errorf("archive %s: module %s is both %s and %s", path, mod.Name, old.Path, mod.Path)
				}
				d.mods[mod.Name] = mod
				if want.wants(mod) {
					data[ver+"/"+mod.Name] = b
				} else {
					sp.put(ver+"/"+mod.Name, b)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("archive %s: %s: %w", path, h.Name, err)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil && isBzImage(path) {
			return nil, fmt.Errorf("%s is a bare kernel image, without the modules a guest needs; name a kernel package holding boot/vmlinuz-* and lib/modules/VERSION/ (deb:linux-image-VERSION-amd64=…)", path)
		}
		return nil, err
	}

	var versions []string
	for v, d := range dirs {
		if len(d.mods) > 0 {
			versions = append(versions, v)
		}
	}
	sort.Strings(versions)
	if len(images) == 0 && len(versions) == 0 {
		if me := metaPackage(path); me != nil {
			return nil, me
		}
	}
	switch len(versions) {
	case 0:
		return nil, fmt.Errorf("archive %s has no kernel modules (no lib/modules/VERSION/ with .ko files): a kernel source must carry its modules", path)
	case 1:
	default:
		return nil, fmt.Errorf("archive %s has modules for %d kernels (%s); a kernel source must hold one", path, len(versions), strings.Join(versions, ", "))
	}
	var imageNames []string
	for n := range images {
		imageNames = append(imageNames, n)
	}
	sort.Strings(imageNames)
	switch len(imageNames) {
	case 0:
		return nil, fmt.Errorf("archive %s has no kernel image matching %q", path, imageGlob)
	case 1:
	default:
		return nil, fmt.Errorf("kernel image pattern %q matches %d files in archive %s (%s); it must match exactly one",
			imageGlob, len(imageNames), path, strings.Join(imageNames, ", "))
	}

	ver := versions[0]
	d := dirs[ver]
	k := &Kernel{
		Version:        ver,
		ImageName:      imageNames[0],
		Image:          images[imageNames[0]],
		ModulesDir:     strings.TrimSuffix(d.prefix, "/"),
		Modules:        d.mods,
		Builtin:        map[string]bool{},
		Archive:        path,
		builtinAliases: map[string]string{},
		aliases:        map[string][]string{},
		data:           map[string][]byte{},
	}
	for key, b := range data {
		if v, name, _ := strings.Cut(key, "/"); v == ver {
			k.data[name] = b
		}
	}
	for _, line := range strings.Split(string(d.builtin), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			k.Builtin[nameFromPath(line)] = true
		}
	}
	for name, aliases := range parseBuiltinModinfo(d.bmodinfo) {
		k.Builtin[name] = true
		for _, a := range aliases {
			k.builtinAliases[a] = name
		}
	}
	if d.hasDep {
		if err := k.applyModulesDep(d.dep); err != nil {
			return nil, fmt.Errorf("archive %s: %s/modules.dep: %w", path, k.ModulesDir, err)
		}
	}
	for _, m := range k.Modules {
		for _, a := range m.Aliases {
			k.aliases[a] = append(k.aliases[a], m.Name)
		}
	}
	for _, names := range k.aliases {
		sort.Strings(names)
	}
	if err := k.keepClosure(append(append([]string(nil), DefaultModules...), opts.Modules...), sp); err != nil {
		return nil, err
	}
	return k, nil
}

// keepClosure takes from the spill file the bytes of every module in the
// closure of names that Load did not keep as it passed: those it reached
// before the module depending on them. A name the kernel does not know is
// left for Closure to report.
func (k *Kernel) keepClosure(names []string, sp *spill) error {
	for _, n := range names {
		mods, err := k.Closure([]string{n})
		if err != nil {
			continue
		}
		for _, m := range mods {
			if _, ok := k.data[m.Name]; ok {
				continue
			}
			b, err := sp.get(k.Version + "/" + m.Name)
			if err != nil {
				return fmt.Errorf("archive %s: %s/%s: %w", k.Archive, k.ModulesDir, m.Path, err)
			}
			if b == nil {
				continue // not spilled: ReadModules reads it from the archive
			}
			if !bytes.HasPrefix(b, elfMagic) || int64(len(b)) != m.Size {
				return fmt.Errorf("archive %s: %s/%s: spilled bytes differ from the module read", k.Archive, k.ModulesDir, m.Path)
			}
			k.data[m.Name] = b
		}
	}
	return nil
}

// walked, if set, is called with the name of each archive entry a walk
// goes on to read, after checking its context; tests see through it where
// an interrupted walk stopped.
var walked func(name string)

// walk is archive.WalkFile over the archive at path, stopping once ctx
// ends: before each entry, and before each chunk read of an entry (the
// kernel image and some modules are large and slow to decompress).
func walk(ctx context.Context, path string, fn archive.WalkFunc) error {
	return archive.WalkFile(path, func(h *tar.Header, body io.Reader) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if walked != nil {
			walked(h.Name)
		}
		return fn(h, ctxio.Reader(ctx, body))
	})
}

// isBzImage reports whether the file at path is an x86 boot image: the
// boot protocol's "HdrS" signature at offset 0x202.
func isBzImage(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var sig [4]byte
	_, err = f.ReadAt(sig[:], 0x202)
	return err == nil && string(sig[:]) == "HdrS"
}

// pathMatch is path.Match on cleaned archive names.
func pathMatch(pattern, name string) (bool, error) {
	return path.Match(archive.CleanName(pattern), name)
}

func isModuleFile(rel string) bool {
	for _, ext := range []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"} {
		if strings.HasSuffix(rel, ext) {
			return true
		}
	}
	return false
}

// nameFromPath derives a module's name from its file path, the way
// modules.builtin and modules.dep name modules.
func nameFromPath(p string) string {
	base := path.Base(p)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return canonical(base)
}

// canonical spells a module name as the kernel does: "-" and "_" are the
// same character, and the kernel uses "_".
func canonical(name string) string { return strings.ReplaceAll(name, "-", "_") }

// readModule reads one module file: decompresses it, checks that it is an
// ELF object, and reads its .modinfo.
func readModule(rel string, body io.Reader) (*Module, []byte, error) {
	rc, comp, err := archive.Decompress(body)
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, nil, err
	}
	info, err := readModinfo(b)
	if err != nil {
		return nil, nil, err
	}
	m := &Module{Path: rel, Compression: comp, Size: int64(len(b))}
	m.Name = canonical(info.first("name"))
	if m.Name == "" {
		m.Name = nameFromPath(rel)
	}
	for _, d := range strings.Split(info.first("depends"), ",") {
		if d = strings.TrimSpace(d); d != "" {
			m.Depends = append(m.Depends, canonical(d))
		}
	}
	for _, sd := range info.all("softdep") {
		pre, post := parseSoftdep(sd)
		m.SoftPre = append(m.SoftPre, pre...)
		m.SoftPost = append(m.SoftPost, post...)
	}
	m.Aliases = info.all("alias")
	return m, b, nil
}

// parseSoftdep parses "pre: a b post: c".
func parseSoftdep(s string) (pre, post []string) {
	var cur *[]string
	for _, f := range strings.Fields(s) {
		switch f {
		case "pre:":
			cur = &pre
		case "post:":
			cur = &post
		default:
			if cur != nil {
				*cur = append(*cur, f)
			}
		}
	}
	return pre, post
}

// applyModulesDep replaces each module's Depends with its line in
// modules.dep ("kernel/fs/ext4/ext4.ko: kernel/fs/jbd2/jbd2.ko …").
func (k *Kernel) applyModulesDep(dep []byte) error {
	byPath := map[string]*Module{}
	for _, m := range k.Modules {
		byPath[m.Path] = m
	}
	lookup := func(p string) (*Module, error) {
		p = strings.TrimPrefix(p, "/")
		p = strings.TrimPrefix(p, "usr/")
		p = strings.TrimPrefix(p, "lib/modules/"+k.Version+"/")
		if m := byPath[p]; m != nil {
			return m, nil
		}
		return nil, fmt.Errorf("names %s, which the archive does not hold", p)
	}
	for i, line := range strings.Split(string(dep), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		target, deps, ok := strings.Cut(line, ":")
		if !ok {
			return fmt.Errorf("line %d: no colon", i+1)
		}
		m, err := lookup(target)
		if err != nil {
			return fmt.Errorf("line %d: %w", i+1, err)
		}
		m.Depends = nil
		for _, p := range strings.Fields(deps) {
			d, err := lookup(p)
			if err != nil {
				return fmt.Errorf("line %d: %w", i+1, err)
			}
			m.Depends = append(m.Depends, d.Name)
		}
	}
	return nil
}

// metaPackage returns a *MetaPackageError when the archive at path is a
// Debian kernel meta package, and nil otherwise.
func metaPackage(path string) *MetaPackageError {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	fields, err := archive.Control(f)
	if err != nil {
		return nil
	}
	target, ver, ok := FollowMeta(fields)
	if !ok {
		return nil
	}
	return &MetaPackageError{Archive: path, Package: fields.Get("Package"), Version: fields.Get("Version"),
		Target: target, TargetVersion: ver}
}

var versionedImage = regexp.MustCompile(`^linux-image-[0-9][^ ]*$`)

// FollowMeta reads the control fields of a Debian kernel meta package
// (linux-image-amd64) and returns the versioned kernel package it depends
// on (linux-image-6.1.0-57-amd64) with the exact version it requires, if
// it names one. ok is false when no dependency is a versioned kernel
// image package.
func FollowMeta(fields archive.Fields) (pkg, version string, ok bool) {
	self := fields.Get("Package")
	for _, dep := range strings.Split(fields.Get("Depends"), ",") {
		alt, _, _ := strings.Cut(dep, "|")
		alt = strings.TrimSpace(alt)
		name, rest, _ := strings.Cut(alt, " ")
		name, _, _ = strings.Cut(name, "(")
		name, _, _ = strings.Cut(name, ":") // architecture qualifier
		if name == self || !versionedImage.MatchString(name) || strings.HasSuffix(name, "-dbg") {
			continue
		}
		rest = strings.TrimSpace(rest)
		if v, found := strings.CutPrefix(rest, "(="); found {
			version = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), ")"))
		}
		return name, version, true
	}
	return "", "", false
}

// ReadModules returns the decompressed bytes of mods (as Closure lists
// them), by module name. Bytes Load kept are used as they are; the rest
// are read in one more pass over the archive, which stops once all are
// found, or with ctx's error once ctx ends.
func (k *Kernel) ReadModules(ctx context.Context, mods []*Module) (map[string][]byte, error) {
	out := map[string][]byte{}
	missing := map[string]*Module{}
	for _, m := range mods {
		if b, ok := k.data[m.Name]; ok {
			out[m.Name] = b
		} else {
			missing[k.ModulesDir+"/"+m.Path] = m
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	err := walk(ctx, k.Archive, func(h *tar.Header, body io.Reader) error {
		m := missing[h.Name]
		if m == nil || h.Typeflag != tar.TypeReg {
			return nil
		}
		rc, _, err := archive.Decompress(body)
		if err != nil {
			return fmt.Errorf("archive %s: %s: %w", k.Archive, h.Name, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("archive %s: %s: %w", k.Archive, h.Name, err)
		}
		if !bytes.HasPrefix(b, elfMagic) || int64(len(b)) != m.Size {
			return fmt.Errorf("archive %s: %s changed since it was loaded", k.Archive, h.Name)
		}
		out[m.Name] = b
		delete(missing, h.Name)
		if len(missing) == 0 {
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		var names []string
		for p := range missing {
			names = append(names, p)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("archive %s no longer holds %s", k.Archive, strings.Join(names, ", "))
	}
	return out, nil
}
