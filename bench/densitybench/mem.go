package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/sbx-dev/sbx/bench/internal/vmbench"
)

// usage is memory as smaps counts it (vmbench.Usage).
type usage = vmbench.Usage

// mapping is one virtual memory area of /proc/PID/smaps.
type mapping = vmbench.Mapping

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
func (q qemuMemory) Beyond() usage { return q.Total.Minus(q.RAM) }

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
	ram, err := vmbench.GuestRAM(maps, memory)
	if err != nil {
		return qemuMemory{}, err
	}
	q := qemuMemory{RAM: ram.Usage}
	for _, m := range maps {
		q.Total = q.Total.Plus(m.Usage)
		if isCodeBuffer(m) {
			q.Code = q.Code.Plus(m.Usage)
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
	maps, err := vmbench.ParseSmaps(bytes.NewReader(b), path)
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
		n, err := vmbench.Kilobytes(value)
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
			return vmbench.Kilobytes(v)
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
