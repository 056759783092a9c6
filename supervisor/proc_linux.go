package supervisor

import (
	"bytes"
	"os"
	"strconv"
)

// processAlive reports whether pid runs; a zombie does not count.
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// ownsProcess reports whether process pid belongs to the sandbox of the
// supervisor directory dir: its command line names dir (the supervisor's
// last argument is dir; QEMU's sockets are inside it). A directory whose
// name merely starts the same ("box" and "box-2") does not count. It guards the
// kills of Remove against a process id reused by an unrelated process.
func ownsProcess(dir string, pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	return namesDir(bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}), dir)
}
