package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// usage is resident memory in bytes, as /proc/PID/smaps counts it: the
// resident set (Rss), its proportional share (Pss: each page divided
// among the processes that map it) and the part of it that is anonymous
// (Anonymous: pages no file backs, written copies of file pages
// included), which only this process holds and the host cannot reclaim
// without swap.
type usage struct {
	Rss, Pss, Anon int64
}

func (a usage) plus(b usage) usage  { return usage{a.Rss + b.Rss, a.Pss + b.Pss, a.Anon + b.Anon} }
func (a usage) minus(b usage) usage { return usage{a.Rss - b.Rss, a.Pss - b.Pss, a.Anon - b.Anon} }

// mapping is one virtual memory area of /proc/PID/smaps.
type mapping struct {
	Start, End uint64
	Perms      string // "rw-p"
	Path       string // empty for an anonymous mapping
	Size       int64
	Usage      usage
	Flags      []string // VmFlags
}

func (m mapping) hasFlag(f string) bool { return slices.Contains(m.Flags, f) }

// parseSmaps reads the mappings of a /proc/PID/smaps file; name names it
// in errors.
func parseSmaps(r io.Reader, name string) ([]mapping, error) {
	var maps []mapping
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
			cur.Size, err = kilobytes(value)
		case "Rss":
			cur.Usage.Rss, err = kilobytes(value)
		case "Pss":
			cur.Usage.Pss, err = kilobytes(value)
		case "Anonymous":
			cur.Usage.Anon, err = kilobytes(value)
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
	if err1 != nil || err2 != nil || end < start || len(f[1]) != 4 {
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

// kilobytes parses a smaps value such as " 524288 kB" into bytes.
func kilobytes(s string) (int64, error) {
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

// guestRAM finds the mapping that holds a QEMU's guest RAM of memory
// bytes: QEMU maps a RAM block with one anonymous, writable,
// non-executable mmap of exactly its size, between guard pages, marked
// MADV_DONTFORK ("dc") and mergeable ("mg"). q35's RAM below 4 GiB is one
// block, so a guest of 1 GiB has one such mapping. Free page reporting
// discards ranges inside it (MADV_DONTNEED), which leaves it one mapping.
// The TCG translation buffer is anonymous and large too but executable.
func guestRAM(maps []mapping, memory int64) (mapping, error) {
	var cands []mapping
	for _, m := range maps {
		if m.Size != memory || m.Path != "" || m.Perms[0] != 'r' || m.Perms[1] != 'w' || m.Perms[2] == 'x' || m.hasFlag("ex") {
			continue
		}
		cands = append(cands, m)
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
		return mapping{}, fmt.Errorf("no anonymous writable mapping of %d MiB (the guest's memory)", memory>>20)
	default:
		return mapping{}, fmt.Errorf("%d mappings of %d MiB look like guest RAM; cannot tell which", len(cands), memory>>20)
	}
}

// isCodeBuffer reports whether a mapping is TCG's translation buffer: an
// anonymous executable mapping, or a view of the "tcg-jit" memfd when
// QEMU maps the code twice to keep writing and executing apart.
func isCodeBuffer(m mapping) bool {
	return (m.Perms[2] == 'x' && m.Path == "") || strings.HasPrefix(m.Path, "/memfd:tcg-jit")
}

// qemuMemory is one QEMU's memory, split the way the benchmark reports
// it.
type qemuMemory struct {
	Total usage // every mapping
	RAM   usage // the guest RAM mapping
	Code  usage // TCG's translation buffer
}

// Beyond is QEMU's memory less its guest RAM.
func (q qemuMemory) Beyond() usage { return q.Total.minus(q.RAM) }

// Overhead is the host memory one idle sandbox's QEMU costs beyond its
// guest's RAM, as decision 0009 defines it: the anonymous resident memory
// of every mapping but the guest RAM's. That is QEMU's heap and stacks,
// the copy of the kernel it keeps to boot from, the written pages of its
// data segments and TCG's translation buffer, none of which another
// sandbox shares or the host can reclaim. Clean file pages (QEMU's code
// and libraries, the mapped initramfs) are left out: the page cache holds
// them once for every sandbox on the host, and can drop them.
func (q qemuMemory) Overhead() int64 { return q.Total.Anon - q.RAM.Anon }

// SharedFile is the rest of QEMU's resident set beyond the guest RAM:
// clean file pages.
func (q qemuMemory) SharedFile() int64 { return q.Beyond().Rss - q.Overhead() }

// summarize splits a QEMU's mappings.
func summarize(maps []mapping, memory int64) (qemuMemory, error) {
	ram, err := guestRAM(maps, memory)
	if err != nil {
		return qemuMemory{}, err
	}
	q := qemuMemory{RAM: ram.Usage}
	for _, m := range maps {
		q.Total = q.Total.plus(m.Usage)
		if isCodeBuffer(m) {
			q.Code = q.Code.plus(m.Usage)
		}
	}
	return q, nil
}

// readQEMU reads the memory of QEMU process pid with a guest of memory
// bytes.
func readQEMU(pid int, memory int64) (qemuMemory, error) {
	path := fmt.Sprintf("/proc/%d/smaps", pid)
	b, err := os.ReadFile(path)
	if err != nil {
		return qemuMemory{}, err
	}
	maps, err := parseSmaps(bytes.NewReader(b), path)
	if err != nil {
		return qemuMemory{}, err
	}
	q, err := summarize(maps, memory)
	if err != nil {
		return qemuMemory{}, fmt.Errorf("%s: %w", path, err)
	}
	return q, nil
}

// readRollup reads a whole process's memory from /proc/PID/smaps_rollup.
func readRollup(pid int) (usage, error) {
	path := fmt.Sprintf("/proc/%d/smaps_rollup", pid)
	b, err := os.ReadFile(path)
	if err != nil {
		return usage{}, err
	}
	return parseRollup(b, path)
}

func parseRollup(b []byte, path string) (usage, error) {
	var u usage
	seen := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch key {
		case "Rss":
			dst = &u.Rss
		case "Pss":
			dst = &u.Pss
		case "Anonymous":
			dst = &u.Anon
		default:
			continue
		}
		n, err := kilobytes(value)
		if err != nil {
			return usage{}, fmt.Errorf("%s: %s: %w", path, key, err)
		}
		*dst = n
		seen[key] = true
	}
	if len(seen) != 3 {
		return usage{}, fmt.Errorf("%s lacks one of Rss, Pss and Anonymous", path)
	}
	return u, nil
}

// memAvailable reads MemAvailable from /proc/meminfo: the kernel's
// estimate of the memory it can give new work without swapping.
func memAvailable() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	return parseMemAvailable(b)
}

func parseMemAvailable(b []byte) (int64, error) {
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			return kilobytes(v)
		}
	}
	return 0, fmt.Errorf("/proc/meminfo has no MemAvailable line")
}

// cpuTime reads the CPU time (user and system) process pid has used, in
// clock ticks of 1/100 s, from /proc/PID/stat.
func cpuTime(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseCPUTime(b)
}

func parseCPUTime(b []byte) (float64, error) {
	// The command name is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat line %q has no command name", b)
	}
	f := strings.Fields(string(b[i+1:]))
	// After the name: state(0) ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime(11) stime(12).
	if len(f) < 13 {
		return 0, fmt.Errorf("stat line %q is short", b)
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("stat line %q: utime or stime is not a number", b)
	}
	// USER_HZ is 100 on every Linux sbx runs on.
	return float64(u+s) / 100, nil
}
