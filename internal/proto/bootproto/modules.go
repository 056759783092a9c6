package bootproto

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"strings"
)

// ModuleEntry is one line of the module manifest: a kernel module to load
// and the file holding it.
type ModuleEntry struct {
	// Name is the module's name ("virtio_blk").
	Name string
	// File is the uncompressed module's path relative to the initramfs
	// root ("lib/modules/6.1.0-57-amd64/kernel/drivers/block/virtio_blk.ko").
	File string
}

const moduleListHeader = "# sbx guest kernel modules, loaded in this order: NAME PATH\n"

// WriteModuleList writes the module manifest: a comment line, then one
// "NAME PATH" line per module in load order (every dependency before the
// modules needing it).
func WriteModuleList(w io.Writer, mods []ModuleEntry) error {
	var b strings.Builder
	b.WriteString(moduleListHeader)
	for _, m := range mods {
		if err := checkModuleEntry(m); err != nil {
			return err
		}
		b.WriteString(m.Name + " " + m.File + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ParseModuleList reads a module manifest. Blank lines and lines starting
// with "#" are skipped. Errors name the manifest (name) and line.
func ParseModuleList(r io.Reader, name string) ([]ModuleEntry, error) {
	var out []ModuleEntry
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want NAME PATH, got %q", name, n, line)
		}
		m := ModuleEntry{Name: fields[0], File: fields[1]}
		if err := checkModuleEntry(m); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

func checkModuleEntry(m ModuleEntry) error {
	if m.Name == "" || strings.ContainsAny(m.Name, " \t\n/") {
		return fmt.Errorf("module name %q is empty or has a space or slash", m.Name)
	}
	if m.File == "" || strings.ContainsAny(m.File, " \t\n") || path.IsAbs(m.File) || path.Clean(m.File) != m.File ||
		m.File == ".." || strings.HasPrefix(m.File, "../") {
		return fmt.Errorf("module %s: file %q must be a clean relative path without spaces", m.Name, m.File)
	}
	return nil
}
