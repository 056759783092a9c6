//go:build !linux

package supervisor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// sandboxProcess is a process that looks like the supervisor or the QEMU
// of one supervisor directory (findProcess). Without pidfds nothing
// proves that a signal would reach that process rather than one that
// reused its id, so on this system it is only reported, never signalled.
type sandboxProcess struct {
	pid  int
	role procRole
	dir  string
}

// findProcess returns process pid when, as ps shows it, it runs as this
// user with the argument vector sbx gives the process of role of dir
// (isSandboxArgv, on ps's space-separated command line: a path with a
// space never matches). nil when it does not or cannot be told.
func findProcess(dir string, pid int, role procRole) *sandboxProcess {
	if pid <= 0 {
		return nil
	}
	out, err := exec.Command("ps", "-ww", "-o", "uid=", "-o", "state=", "-o", "command=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return nil
	}
	f := strings.Fields(string(out))
	if len(f) < 3 || f[0] != strconv.Itoa(os.Getuid()) || strings.HasPrefix(f[1], "Z") {
		return nil
	}
	if !isSandboxArgv(f[2:], dir, role) {
		return nil
	}
	return &sandboxProcess{pid: pid, role: role, dir: dir}
}

// kill refuses: see sandboxProcess.
func (p *sandboxProcess) kill() error {
	return fmt.Errorf("supervisor: the %s (pid %d) of %s still runs, and this system cannot signal it without risking another process; end it by hand", p.role, p.pid, p.dir)
}

func (p *sandboxProcess) wait(context.Context, time.Duration) bool { return false }

func (p *sandboxProcess) close() {}
