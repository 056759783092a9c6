package vmbench

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Usage is memory as /proc/PID/smaps counts it, in bytes: the resident
// set (Rss), its proportional share (Pss: each page divided among the
// processes that map it) and the part of it that is anonymous (Anon:
// pages no file backs, written copies of file pages included), which
// only this process holds and the host cannot reclaim without swap.
type Usage struct {
	Rss, Pss, Anon int64
}

// Plus returns a+b, field by field.
func (a Usage) Plus(b Usage) Usage { return Usage{a.Rss + b.Rss, a.Pss + b.Pss, a.Anon + b.Anon} }

// Minus returns a-b, field by field.
func (a Usage) Minus(b Usage) Usage { return Usage{a.Rss - b.Rss, a.Pss - b.Pss, a.Anon - b.Anon} }

// Mapping is one virtual memory area of /proc/PID/smaps.
type Mapping struct {
	Start, End uint64
	Perms      string // "rw-p"
	Path       string // empty for an anonymous mapping
	Size       int64  // bytes
	Usage      Usage
	Flags      []string // VmFlags: "rd", "wr", "mg"…
}

// HasFlag reports whether VmFlags lists flag.
func (m Mapping) HasFlag(flag string) bool { return slices.Contains(m.Flags, flag) }

// ParseSmaps reads the mappings of a /proc/PID/smaps file; name names it
// in errors.
func ParseSmaps(r io.Reader, name string) ([]Mapping, error) {
	var maps []Mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if m, ok := parseMapHeader(text); ok {
			maps = append(maps, m)
			continue
		}
		key, value, ok := strings.Cut(text, ":")
		if !ok || len(maps) == 0 {
			return nil, fmt.Errorf("%s:%d: %q is neither a mapping nor a field", name, line, text)
		}
		cur := &maps[len(maps)-1]
		var err error
		switch key {
		case "Size":
			cur.Size, err = Kilobytes(value)
		case "Rss":
			cur.Usage.Rss, err = Kilobytes(value)
		case "Pss":
			cur.Usage.Pss, err = Kilobytes(value)
		case "Anonymous":
			cur.Usage.Anon, err = Kilobytes(value)
		case "VmFlags":
			cur.Flags = strings.Fields(value)
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %w", name, line, key, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(maps) == 0 {
		return nil, fmt.Errorf("%s has no mappings", name)
	}
	return maps, nil
}

// parseMapHeader parses a mapping's first line:
// "7fd777e00000-7fd797e00000 rw-p 00000000 00:00 0   [path]".
func parseMapHeader(s string) (Mapping, bool) {
	f := strings.Fields(s)
	if len(f) < 5 {
		return Mapping{}, false
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return Mapping{}, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end < start || len(f[1]) != 4 {
		return Mapping{}, false
	}
	m := Mapping{Start: start, End: end, Perms: f[1]}
	if len(f) > 5 {
		// The path is what follows the inode, spaces included.
		rest := s
		for range 5 {
			rest = strings.TrimLeft(rest, " \t")
			rest = rest[strings.IndexAny(rest+" ", " \t"):]
		}
		m.Path = strings.TrimSpace(rest)
	}
	return m, true
}

// Kilobytes parses a smaps value such as " 524288 kB" into bytes.
func Kilobytes(s string) (int64, error) {
	f := strings.Fields(s)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("%q is not a size in kB", strings.TrimSpace(s))
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size in kB", strings.TrimSpace(s))
	}
	return n << 10, nil
}

// GuestRAM finds the mapping of a QEMU process that holds its guest's RAM
// of memory bytes.
//
// QEMU allocates a RAM block ("pc.ram" on x86's q35 and pc) with one
// mmap of exactly the block's size, aligned, with a guard page after it,
// and marks it MADV_DONTFORK ("dc" in VmFlags) and, with mem-merge on
// (the default), MADV_MERGEABLE ("mg"). Guest RAM of q35 is one block
// whatever its size (above 2 GiB it is split into two aliases of the
// same block, not two blocks), so the guest RAM is the anonymous,
// writable, non-executable mapping of exactly the guest's memory size.
// The guard page keeps the kernel from merging it with its neighbour,
// and no other mapping of QEMU has that size unless the size happens to
// be a common one: the TCG translation buffer (1 GiB by default) is
// also anonymous and huge but executable ("ex"), and a fixed-size heap
// arena would not carry "dc" or "mg". When more than one mapping
// qualifies, the one QEMU marked for its RAM blocks is taken. A
// memory-backend-file or -memfd RAM is a file mapping whose path names
// the backend ("/memfd:pc.ram (deleted)"); it qualifies by size too.
func GuestRAM(maps []Mapping, memory int64) (Mapping, error) {
	var cands []Mapping
	for _, m := range maps {
		if m.Size != memory || len(m.Perms) < 3 || m.Perms[0] != 'r' || m.Perms[1] != 'w' || m.Perms[2] == 'x' || m.HasFlag("ex") {
			continue
		}
		if m.Path == "" || strings.Contains(m.Path, "pc.ram") || strings.Contains(m.Path, "memory-backend") || strings.HasPrefix(m.Path, "/memfd:") {
			cands = append(cands, m)
		}
	}
	if len(cands) > 1 {
		var marked []Mapping
		for _, m := range cands {
			if m.HasFlag("dc") || m.HasFlag("mg") {
				marked = append(marked, m)
			}
		}
		cands = marked
	}
	switch len(cands) {
	case 1:
		return cands[0], nil
	case 0:
		return Mapping{}, fmt.Errorf("no writable anonymous mapping of %d MiB (the guest's memory)", memory>>20)
	default:
		return Mapping{}, fmt.Errorf("%d mappings of %d MiB look like guest RAM; cannot tell which", len(cands), memory>>20)
	}
}
