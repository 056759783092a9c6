package supervisor

import (
	"context"
	"errors"
	"fmt"
	"github.com/sbx-dev/sbx/internal/procstat"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// sandboxProcess is a process proven to be the supervisor or the QEMU of
// one supervisor directory (findProcess), held by a pidfd: a signal sent
// through it reaches that process or none, never one that reused its
// process id after it exited.
type sandboxProcess struct {
	pid  int
	fd   int
	role procRole
	dir  string
}

// findProcess returns process pid when it provably is the process of
// role of the supervisor directory dir (absolute and clean), nil when it
// is not, has exited or cannot be told: it must run as this user (every
// one of its user ids is ours), not be a zombie, and have exactly the
// argument vector sbx gives that process (isSandboxArgv). The process is
// opened as a pidfd first and checked to be still alive after its /proc
// files were read, so what was read is that process's. The caller closes
// what it gets.
func findProcess(dir string, pid int, role procRole) *sandboxProcess {
	if pid <= 0 {
		return nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil
	}
	p := &sandboxProcess{pid: pid, fd: fd, role: role, dir: dir}
	if !p.check() {
		p.close()
		return nil
	}
	return p
}

// check reads the process's /proc files and says whether it is still the
// process of its role: this user's, alive, with the exact argument
// vector.
func (p *sandboxProcess) check() bool {
	proc := "/proc/" + strconv.Itoa(p.pid)
	status, err := os.ReadFile(proc + "/status")
	if err != nil || !ownUids(status) {
		return false
	}
	cmdline, err := os.ReadFile(proc + "/cmdline")
	if err != nil || len(cmdline) == 0 {
		return false
	}
	args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
	if !isSandboxArgv(args, p.dir, p.role) {
		return false
	}
	if st, _, ok := p.stat(); !ok || st == 'Z' {
		return false
	}
	// The pid was not reused while the files were read: the process the
	// pidfd holds has not exited since it was opened.
	return unix.PidfdSendSignal(p.fd, 0, nil, 0) == nil
}

// stat returns the process's state letter and process group from
// /proc/PID/stat.
func (p *sandboxProcess) stat() (state byte, pgid int, ok bool) {
	st, err := procstat.Read(p.pid)
	if err != nil {
		return 0, 0, false
	}
	return st.State, st.Pgrp, true
}

// ownUids reports whether every user id on the Uid line of a
// /proc/PID/status (real, effective, saved, file system) is ours.
func ownUids(status []byte) bool {
	uid := strconv.Itoa(os.Getuid())
	for line := range strings.SplitSeq(string(status), "\n") {
		rest, ok := strings.CutPrefix(line, "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return false
		}
		for _, id := range f {
			if id != uid {
				return false
			}
		}
		return true
	}
	return false
}

// kill sends SIGKILL to the process through its pidfd. For QEMU, which
// leads its own process group (internal/machine/qemu), the group is killed too,
// but only when the process checked is its leader: it is stopped first,
// so that it cannot exit (and its group id be reused) between the last
// check and the signal to the group.
func (p *sandboxProcess) kill() error {
	if p.role == roleQEMU {
		if err := unix.PidfdSendSignal(p.fd, unix.SIGSTOP, nil, 0); err == nil {
			if _, pgid, ok := p.stat(); ok && pgid == p.pid && p.check() {
				unix.Kill(-p.pid, unix.SIGKILL)
			}
		}
	}
	err := unix.PidfdSendSignal(p.fd, unix.SIGKILL, nil, 0)
	if err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("supervisor: killing the %s (pid %d) of %s: %w", p.role, p.pid, p.dir, err)
	}
	return nil
}

// wait waits for the process to exit (a zombie has), for at most limit.
func (p *sandboxProcess) wait(ctx context.Context, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 50)
		if n > 0 {
			return true
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return false
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
	}
}

func (p *sandboxProcess) close() { unix.Close(p.fd) }
