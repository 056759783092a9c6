package rootfs

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/debrepo"
	"github.com/sbx-dev/sbx/internal/build/layers"
	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/proto/imageinfo"
)

// packages installs the image's pinned packages (Options.Packages, or
// Options.Apk for an Alpine base).
func (a *assembler) packages(ctx context.Context) error {
	if a.opts.Apk != nil {
		return a.apkPackages(ctx)
	}
	if len(a.opts.Packages) == 0 {
		if len(a.img.Packages.Requests) > 0 {
			return diags.WithSubject(fmt.Errorf("image %q has packages, but none were fetched", a.img.Name), a.img.Packages.Range)
		}
		return nil
	}
	if err := debrepo.Install(ctx, a.tree, a.opts.Packages); err != nil {
		return diags.WithSubject(fmt.Errorf("image %q: %w", a.img.Name, err), a.img.Packages.Range)
	}
	for _, p := range a.opts.Packages {
		a.inventory = append(a.inventory, imageinfo.Package{Name: p.Pin.Name, Version: p.Pin.Version, Architecture: p.Pin.Architecture})
	}
	sort.Slice(a.inventory, func(i, j int) bool { return a.inventory[i].Name < a.inventory[j].Name })
	return nil
}

// searchPath is where a command named without a path is looked for, in
// order, as a login shell's PATH has it.
var searchPath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// maxELF bounds how much of one executable or library is read to check
// it.
const maxELF = 512 << 20

// executables checks every executable the image declares: it is found
// (by name in searchPath, or at its absolute path), it is a regular file
// with an execute bit, a script's interpreter is found the same way, and
// an ELF file's interpreter and every shared library it needs, and those
// libraries need in turn, resolve inside the image. Symbolic links are
// resolved inside the tree, never on the host.
func (a *assembler) executables() error {
	for _, name := range a.img.Packages.Executables {
		p, err := a.findExecutable(name)
		if err != nil {
			return diags.WithSubject(fmt.Errorf("image %q: executable %s: %w", a.img.Name, name, err), a.img.Packages.Range)
		}
		a.execs = append(a.execs, imageinfo.Executable{Name: name, Path: p})
	}
	return nil
}

func (a *assembler) findExecutable(name string) (string, error) {
	cands := []string{name}
	if !strings.HasPrefix(name, "/") {
		cands = cands[:0]
		for _, d := range searchPath {
			cands = append(cands, d+"/"+name)
		}
	}
	for _, c := range cands {
		real, e, ok := resolveLinks(a.tree, c)
		if !ok {
			continue
		}
		if e.Type != tar.TypeReg {
			return "", fmt.Errorf("%s is a %s, not a file", c, layers.TypeName(e.Type))
		}
		if e.Mode&0o111 == 0 {
			return "", fmt.Errorf("%s is not executable (mode %04o)", c, e.Mode)
		}
		if err := a.checkProgram(real, 0); err != nil {
			return "", fmt.Errorf("%s: %w", c, err)
		}
		return c, nil
	}
	return "", fmt.Errorf("not found in %s", strings.Join(cands, ", "))
}

// checkProgram checks a script's interpreter or an ELF file's loader and
// libraries.
func (a *assembler) checkProgram(p string, depth int) error {
	data, err := readTree(a.tree, p)
	if err != nil {
		return err
	}
	if bytes.HasPrefix(data, []byte("#!")) {
		line, _, _ := bytes.Cut(data[2:], []byte("\n"))
		f := strings.Fields(string(line))
		if len(f) == 0 {
			return fmt.Errorf("its #! line names no interpreter")
		}
		if depth > 3 {
			return fmt.Errorf("interpreters nest too deep")
		}
		real, e, ok := resolveLinks(a.tree, f[0])
		if !ok || e.Type != tar.TypeReg {
			return fmt.Errorf("its interpreter %s is not in the image", f[0])
		}
		return a.checkProgram(real, depth+1)
	}
	if !bytes.HasPrefix(data, []byte(elf.ELFMAG)) {
		return nil
	}
	return a.checkELF(p, data)
}

// checkELF checks the interpreter and the closure of DT_NEEDED libraries
// of the ELF file at p.
func (a *assembler) checkELF(p string, data []byte) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("reading ELF: %w", err)
	}
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(prog.Open(), 4096))
		if err != nil {
			return err
		}
		interp := strings.TrimRight(string(b), "\x00")
		if _, e, ok := resolveLinks(a.tree, interp); !ok || e.Type != tar.TypeReg {
			return fmt.Errorf("its ELF interpreter %s is not in the image", interp)
		}
	}
	dirs := a.libraryDirs(f.Machine)
	seen := map[string]bool{}
	type lib struct{ name, by string }
	queue := []lib{}
	addNeeded := func(file *elf.File, by string) error {
		needed, err := file.ImportedLibraries()
		if err != nil {
			return fmt.Errorf("%s: %w", by, err)
		}
		for _, n := range needed {
			if !seen[n] {
				seen[n] = true
				queue = append(queue, lib{n, by})
			}
		}
		return nil
	}
	if err := addNeeded(f, p); err != nil {
		return err
	}
	for i := 0; i < len(queue) && i < 4096; i++ {
		l := queue[i]
		found := ""
		for _, d := range dirs {
			if real, e, ok := resolveLinks(a.tree, d+"/"+l.name); ok && e.Type == tar.TypeReg {
				found = real
				break
			}
		}
		if found == "" {
			return fmt.Errorf("shared library %s, needed by %s, is not in the image (searched %s)", l.name, l.by, strings.Join(dirs, ", "))
		}
		data, err := readTree(a.tree, found)
		if err != nil {
			return err
		}
		lf, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("%s: reading ELF: %w", found, err)
		}
		if err := addNeeded(lf, found); err != nil {
			return err
		}
	}
	return nil
}

// libraryDirs are the directories the dynamic loader searches: those of
// /etc/ld.so.conf.d/*.conf in the image, then the multiarch and default
// directories for the machine.
func (a *assembler) libraryDirs(m elf.Machine) []string {
	var dirs []string
	for _, p := range a.tree.Paths() {
		if !strings.HasPrefix(p, "/etc/ld.so.conf.d/") || !strings.HasSuffix(p, ".conf") {
			continue
		}
		data, err := readTree(a.tree, p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "/") {
				dirs = append(dirs, path.Clean(line))
			}
		}
	}
	triplet := map[elf.Machine]string{elf.EM_X86_64: "x86_64-linux-gnu", elf.EM_AARCH64: "aarch64-linux-gnu", elf.EM_386: "i386-linux-gnu", elf.EM_ARM: "arm-linux-gnueabihf", elf.EM_RISCV: "riscv64-linux-gnu", elf.EM_S390: "s390x-linux-gnu", elf.EM_PPC64: "powerpc64le-linux-gnu"}[m]
	if triplet != "" {
		dirs = append(dirs, "/lib/"+triplet, "/usr/lib/"+triplet)
	}
	return append(dirs, "/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib")
}

// resolveLinks follows symbolic links in p inside the tree (at most 40,
// as the kernel does) and returns the path reached and its entry.
func resolveLinks(tree *layers.Tree, p string) (string, layers.Entry, bool) {
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
			return "", layers.Entry{}, false
		}
		if e.Type == tar.TypeSymlink {
			links++
			if links > 40 {
				return "", layers.Entry{}, false
			}
			target := e.Linkname
			if !strings.HasPrefix(target, "/") {
				target = path.Join(cur, target)
			}
			rest = append(strings.Split(strings.TrimPrefix(path.Clean(target), "/"), "/"), rest...)
			cur = "/"
			continue
		}
		cur = next
	}
	e, ok := tree.Lookup(cur)
	return cur, e, ok
}

func readTree(tree *layers.Tree, p string) ([]byte, error) {
	r, err := tree.Open(p)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(r, maxELF+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxELF {
		return nil, fmt.Errorf("%s is larger than %d MiB", p, maxELF>>20)
	}
	return b, nil
}
