//go:build !linux

package supervisor

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// processAlive reports whether pid runs.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// ownsProcess reports whether process pid belongs to the sandbox of the
// supervisor directory dir: its command line, as ps shows it, names dir.
// It guards the kills of Remove against a process id reused by an
// unrelated process.
func ownsProcess(dir string, pid int) bool {
	out, err := exec.Command("ps", "-ww", "-o", "command=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return false
	}
	var args [][]byte
	for _, f := range strings.Fields(string(out)) {
		args = append(args, []byte(f))
	}
	return namesDir(args, dir)
}
