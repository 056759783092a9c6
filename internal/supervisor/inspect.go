package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	ctlproto "github.com/sbx-dev/sbx/internal/proto/control"
	"golang.org/x/sys/unix"
)

// Liveness is what Inspect found of a sandbox's supervisor and machine.
type Liveness struct {
	// Running is set when the supervisor answers and runs its sandbox.
	Running bool
	// Status is the supervisor's own answer, or its status file when it
	// does not answer; nil when there is neither.
	Status *Status
	// Gone says why the sandbox does not run, when Running is not set:
	// "its supervisor (pid 41) has exited".
	Gone string
	// Unhealthy is set, and Gone to the same, when the supervisor runs
	// but its guest agent does not answer (Status.Agent): the sandbox
	// cannot run commands, and a plan replaces it as one that is gone.
	Unhealthy string
	// OrphanQEMU is the process id of the sandbox's QEMU when it still
	// runs without a supervisor (the supervisor was killed); Remove ends
	// it. Zero when there is none.
	OrphanQEMU int
}

// Alive reports whether the sandbox's supervisor runs it, whether or not
// its guest agent answers (Running or Unhealthy): its console and logs
// still grow.
func (lv Liveness) Alive() bool { return lv.Running || lv.Unhealthy != "" }

// inspectTimeout bounds how long Inspect waits for a supervisor's
// answer, which includes its ping of the guest agent.
const inspectTimeout = agentPingTimeout + 3*time.Second

// Inspect finds out whether the supervisor in dir, last known as process
// pid running QEMU as process qemuPid (zeros when unknown), still runs its
// sandbox, and whether its guest agent answers (Liveness.Unhealthy). It
// asks the supervisor on its control socket; when that fails
// it looks at the processes themselves, so that a killed supervisor
// whose QEMU lives on is told apart from one that is gone with its
// machine. A process id counts only when the process provably is the
// sandbox's (see findProcess): this user's, with the exact command line
// sbx gave it. It never changes anything.
func Inspect(ctx context.Context, dir string, pid, qemuPid int) Liveness {
	st, err := askStatus(ctx, dir)
	if err == nil {
		lv := Liveness{Status: st}
		switch {
		case pid != 0 && st.Pid != pid:
			// Another supervisor serves the directory (state is stale).
			lv.Gone = fmt.Sprintf("its supervisor (pid %d) was replaced by another (pid %d)", pid, st.Pid)
		case st.State != StateRunning:
			lv.Gone = fmt.Sprintf("its supervisor (pid %d) is %s", st.Pid, st.State)
		case st.Agent != "":
			lv.Unhealthy = fmt.Sprintf("its guest agent %s (supervisor pid %d)", st.Agent, st.Pid)
			lv.Gone = lv.Unhealthy
		default:
			lv.Running = true
		}
		return lv
	}
	var lv Liveness
	if st, err := ReadStatus(dir); err == nil {
		lv.Status = st
		if pid == 0 {
			pid = st.Pid
		}
		if qemuPid == 0 {
			qemuPid = st.QEMUPid
		}
	}
	abs := absDir(dir)
	switch {
	case pid == 0:
		lv.Gone = "it has no supervisor"
	case isRunning(abs, pid, roleSupervisor): // not a reused pid
		lv.Gone = fmt.Sprintf("its supervisor (pid %d) does not answer on %s: %v", pid, filepath.Join(dir, ControlFile), err)
	default:
		lv.Gone = fmt.Sprintf("its supervisor (pid %d) has exited", pid)
		if lv.Status != nil && lv.Status.Pid == pid && lv.Status.Error != "" {
			lv.Gone += ": " + lv.Status.Error
		}
	}
	if isRunning(abs, qemuPid, roleQEMU) {
		lv.OrphanQEMU = qemuPid
		lv.Gone += fmt.Sprintf("; its QEMU (pid %d) still runs", qemuPid)
	}
	return lv
}

// isRunning reports whether pid provably runs as the process of role of
// the supervisor directory dir (see findProcess).
func isRunning(dir string, pid int, role procRole) bool {
	p := findProcess(dir, pid, role)
	if p == nil {
		return false
	}
	p.close()
	return true
}

// absDir returns dir absolute and clean, as Spawn names it to the
// supervisor.
func absDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return filepath.Clean(dir)
}

// askStatus asks the supervisor in dir for its status on the control
// socket.
func askStatus(ctx context.Context, dir string) (*Status, error) {
	ctx, cancel := context.WithTimeout(ctx, inspectTimeout)
	defer cancel()
	conn, err := dialVerified(ctx, filepath.Join(dir, ControlFile))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	line, err := ctlproto.Call(ctx, conn, ctlproto.Request{Verb: ctlproto.Status})
	if err != nil {
		return nil, err
	}
	var st Status
	if err := json.Unmarshal([]byte(line), &st); err != nil {
		return nil, fmt.Errorf("answer %q: %w", line, err)
	}
	return &st, nil
}

// Remove ends the sandbox of the supervisor directory dir whatever state
// it is in, and removes the directory: a running supervisor is asked to
// stop (Stop); a supervisor that does not answer is killed; a QEMU left
// running by a killed supervisor is killed with its process group. pid
// and qemuPid are the processes last recorded for dir (zeros when
// unknown; the status file adds its own). They are hints: a process is
// signalled only when it provably is dir's supervisor or QEMU (see
// findProcess), through a pidfd, so a recorded id that names another
// process, or is reused meanwhile, is never hit; where there are no
// pidfds, nothing is signalled.
//
// Only what sbx makes in dir is removed (clearDir): its files, sockets
// and machine directories, never through a symbolic link; other entries
// are an error, and dir is left. The caller decides which directory is
// the sandbox's (SandboxDir), never a path read from a file. Remove
// returns once no process of the sandbox runs; a missing directory is
// not an error.
func Remove(ctx context.Context, dir string, pid, qemuPid int) error {
	dir = absDir(dir)
	if err := ensureStopped(ctx, dir, pid, qemuPid); err != nil {
		return err
	}
	if err := clearDir(dir, true); err != nil {
		return err
	}
	// The configuration's directory (SandboxDir) goes with its last
	// sandbox; it stays while it holds others.
	unix.Rmdir(filepath.Dir(dir))
	return nil
}

// ensureStopped is Remove without removing the directory: afterwards no
// process of the sandbox runs and no socket or machine directory is left
// in dir (absolute and clean).
func ensureStopped(ctx context.Context, dir string, pid, qemuPid int) error {
	pids, qemuPids := []int{pid}, []int{qemuPid}
	if st, err := ReadStatus(dir); err == nil {
		pids, qemuPids = append(pids, st.Pid), append(qemuPids, st.QEMUPid)
	}
	// A supervisor stops its machine within the machine's stop timeout;
	// one that takes much longer is stuck and is killed below, as is one
	// that answered but did not stop cleanly.
	stopCtx, cancel := context.WithTimeout(ctx, removeStopWait)
	Stop(stopCtx, dir)
	cancel()
	for _, pid := range uniquePids(pids) {
		if err := killProven(ctx, dir, pid, roleSupervisor); err != nil {
			return err
		}
	}
	for _, pid := range uniquePids(qemuPids) {
		if err := killProven(ctx, dir, pid, roleQEMU); err != nil {
			return err
		}
	}
	saveConsole(dir)
	return clearDir(dir, false)
}

// killProven kills pid when it provably is the process of role of dir,
// and waits until it has exited; anything else is left alone.
func killProven(ctx context.Context, dir string, pid int, role procRole) error {
	p := findProcess(dir, pid, role)
	if p == nil {
		return nil
	}
	defer p.close()
	if err := p.kill(); err != nil {
		return err
	}
	if !p.wait(ctx, killWait) {
		return fmt.Errorf("supervisor: the %s (pid %d) of %s is still running after SIGKILL", role, pid, dir)
	}
	return nil
}

// uniquePids returns the distinct positive ids of pids.
func uniquePids(pids []int) []int {
	var out []int
	for _, p := range pids {
		if p > 0 && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// removeStopWait bounds Remove's wait for a supervisor to stop its
// sandbox before it kills the supervisor and QEMU.
const removeStopWait = 2 * time.Minute

// killWait bounds Remove's wait for a killed process to exit.
const killWait = 10 * time.Second
