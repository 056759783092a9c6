package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/sbx-dev/sbx/bench/internal/vmbench"
	"github.com/sbx-dev/sbx/internal/procstat"
)

// memUsage is what smaps counts (sandboxbench reads Rss and Pss).
type memUsage = vmbench.Usage

// mapping is one virtual memory area of /proc/PID/smaps.
type mapping = vmbench.Mapping

func add(a, b memUsage) memUsage { return a.Plus(b) }

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
		n, err := vmbench.Kilobytes(value)
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
	maps, err := vmbench.ParseSmaps(bytes.NewReader(b), path)
	if err != nil {
		return mapping{}, memUsage{}, err
	}
	ram, err = vmbench.GuestRAM(maps, memory)
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
