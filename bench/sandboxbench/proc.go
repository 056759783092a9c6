package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/sbx-dev/sbx/internal/procstat"
)

// memUsage is resident memory: the resident set size and the
// proportional set size (each shared page divided among the processes
// that map it), in bytes.
type memUsage struct {
	Rss, Pss int64
}

func add(a, b memUsage) memUsage { return memUsage{a.Rss + b.Rss, a.Pss + b.Pss} }

// readRollup reads a process's memory from /proc/PID/smaps_rollup.
func readRollup(pid int) (memUsage, error) {
	path := fmt.Sprintf("/proc/%d/smaps_rollup", pid)
	b, err := os.ReadFile(path)
	if err != nil {
		return memUsage{}, err
	}
	var m memUsage
	var seen int
	for line := range strings.Lines(string(b)) {
		key, value, ok := strings.Cut(line, ":")
		if !ok || (key != "Rss" && key != "Pss") {
			continue
		}
		n, err := kilobytes(value)
		if err != nil {
			return memUsage{}, fmt.Errorf("%s: %s: %w", path, key, err)
		}
		if key == "Rss" {
			m.Rss = n
		} else {
			m.Pss = n
		}
		seen++
	}
	if seen != 2 {
		return memUsage{}, fmt.Errorf("%s has no Rss or no Pss line", path)
	}
	return m, nil
}

// kilobytes parses a smaps value such as " 524288 kB" into bytes.
func kilobytes(s string) (int64, error) {
	f := strings.Fields(s)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("%q is not a size in kB", strings.TrimSpace(s))
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size in kB", strings.TrimSpace(s))
	}
	return n << 10, nil
}

// mapping is one virtual memory area of /proc/PID/smaps.
type mapping struct {
	Start, End uint64
	Perms      string // "rw-p"
	Path       string // empty for an anonymous mapping
	Size       int64  // bytes
	Usage      memUsage
	Flags      []string // VmFlags: "rd", "wr", "mg"…
}

// parseSmaps reads the mappings of a /proc/PID/smaps file; name names it
// in errors.
func parseSmaps(r io.Reader, name string) ([]mapping, error) {
	var maps []mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
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
			cur.Size, err = kilobytes(value)
		case "Rss":
			cur.Usage.Rss, err = kilobytes(value)
		case "Pss":
			cur.Usage.Pss, err = kilobytes(value)
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
	return maps, nil
}

// parseMapHeader parses a mapping's first line:
// "7fd777e00000-7fd797e00000 rw-p 00000000 00:00 0   [path]".
func parseMapHeader(s string) (mapping, bool) {
	f := strings.Fields(s)
	if len(f) < 5 {
		return mapping{}, false
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return mapping{}, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || len(f[1]) != 4 {
		return mapping{}, false
	}
	m := mapping{Start: start, End: end, Perms: f[1]}
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

func (m mapping) hasFlag(flag string) bool { return slices.Contains(m.Flags, flag) }

// guestRAM finds the mapping of a QEMU process that holds its guest's RAM
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
func guestRAM(maps []mapping, memory int64) (mapping, error) {
	var cands []mapping
	for _, m := range maps {
		if m.Size != memory || len(m.Perms) < 3 || m.Perms[0] != 'r' || m.Perms[1] != 'w' || m.Perms[2] == 'x' || m.hasFlag("ex") {
			continue
		}
		if m.Path == "" || strings.Contains(m.Path, "pc.ram") || strings.Contains(m.Path, "memory-backend") || strings.HasPrefix(m.Path, "/memfd:") {
			cands = append(cands, m)
		}
	}
	if len(cands) > 1 {
		var marked []mapping
		for _, m := range cands {
			if m.hasFlag("dc") || m.hasFlag("mg") {
				marked = append(marked, m)
			}
		}
		cands = marked
	}
	switch len(cands) {
	case 1:
		return cands[0], nil
	case 0:
		return mapping{}, fmt.Errorf("no writable anonymous mapping of %d MiB (the guest's memory)", memory>>20)
	default:
		return mapping{}, fmt.Errorf("%d mappings of %d MiB look like guest RAM; cannot tell which", len(cands), memory>>20)
	}
}

// codeBuffer sums the memory of QEMU's TCG translation buffer: its
// anonymous executable mappings, or the views of its "tcg-jit" memfd
// when QEMU splits writing and executing the code (each page then
// counts once per view).
func codeBuffer(maps []mapping) memUsage {
	var u memUsage
	for _, m := range maps {
		exe := len(m.Perms) >= 3 && m.Perms[2] == 'x'
		if (exe && m.Path == "") || strings.HasPrefix(m.Path, "/memfd:tcg-jit") {
			u = add(u, m.Usage)
		}
	}
	return u
}

// readQEMUMaps finds the guest RAM mapping of QEMU process pid, and the
// memory of its translation buffer.
func readQEMUMaps(pid int, memory int64) (ram mapping, code memUsage, err error) {
	path := fmt.Sprintf("/proc/%d/smaps", pid)
	b, err := os.ReadFile(path)
	if err != nil {
		return mapping{}, memUsage{}, err
	}
	maps, err := parseSmaps(bytes.NewReader(b), path)
	if err != nil {
		return mapping{}, memUsage{}, err
	}
	ram, err = guestRAM(maps, memory)
	if err != nil {
		return mapping{}, memUsage{}, fmt.Errorf("%s: %w", path, err)
	}
	return ram, codeBuffer(maps), nil
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return procstat.Alive(pid)
}

// qemuProcesses returns the pids of the QEMU system emulators whose
// arguments mention one of the paths: the QEMUs this program made, found
// by the files they were given, whichever process started them.
func qemuProcesses(paths ...string) []int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if !strings.HasPrefix(filepath.Base(args[0]), "qemu-system-") {
			continue
		}
		if !slices.ContainsFunc(args[1:], func(a string) bool {
			return slices.ContainsFunc(paths, func(p string) bool { return p != "" && strings.Contains(a, p) })
		}) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil && alive(pid) {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}
