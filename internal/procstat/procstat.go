package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Stat is what sbx reads of a process's /proc/PID/stat.
type Stat struct {
	// State is the state letter: R, S, D, Z (zombie), T, t, X, I…
	State byte
	// PPid is the parent's process id, Pgrp the process group.
	PPid, Pgrp int
	// Start is when the process started, in clock ticks after boot
	// (field 22): with the process id, it names one process, never one
	// that reused the id later. Zero when the line is too short.
	Start uint64
}

// Zombie reports whether the process has exited and waits to be reaped.
func (s Stat) Zombie() bool { return s.State == 'Z' || s.State == 'X' }

// Read reads /proc/PID/stat.
func Read(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return Parse(b)
}

// Parse parses the content of a /proc/PID/stat file.
func Parse(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, errors.New("procstat: no command name")
	}
	// After the command: state ppid pgrp ...
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("procstat: malformed stat line %q", clip(b[i+1:]))
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return Stat{}, fmt.Errorf("procstat: malformed stat line %q", clip(b[i+1:]))
	}
	st := Stat{State: f[0][0], PPid: ppid, Pgrp: pgrp}
	if len(f) > 19 {
		st.Start, _ = strconv.ParseUint(f[19], 10, 64)
	}
	return st, nil
}

// Alive reports whether process pid exists and is not a zombie.
func Alive(pid int) bool {
	s, err := Read(pid)
	return err == nil && !s.Zombie()
}

func clip(b []byte) string {
	if len(b) > 40 {
		b = b[:40]
	}
	return string(b)
}
