package supervisor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
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
	// OrphanQEMU is the process id of the sandbox's QEMU when it still
	// runs without a supervisor (the supervisor was killed); Remove ends
	// it. Zero when there is none.
	OrphanQEMU int
}

// inspectTimeout bounds how long Inspect waits for a supervisor's answer.
const inspectTimeout = 3 * time.Second

// Inspect finds out whether the supervisor in dir, last known as process
// pid running QEMU as process qemuPid (zeros when unknown), still runs its
// sandbox. It asks the supervisor on its control socket; when that fails
// it looks at the processes themselves, so that a killed supervisor
// whose QEMU lives on is told apart from one that is gone with its
// machine. It never changes anything.
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
	switch {
	case pid == 0:
		lv.Gone = "it has no supervisor"
	case processAlive(pid) && ownsProcess(dir, pid): // not a reused pid
		lv.Gone = fmt.Sprintf("its supervisor (pid %d) does not answer on %s: %v", pid, filepath.Join(dir, ControlFile), err)
	default:
		lv.Gone = fmt.Sprintf("its supervisor (pid %d) has exited", pid)
		if lv.Status != nil && lv.Status.Pid == pid && lv.Status.Error != "" {
			lv.Gone += ": " + lv.Status.Error
		}
	}
	if qemuPid != 0 && processAlive(qemuPid) && ownsProcess(dir, qemuPid) {
		lv.OrphanQEMU = qemuPid
		lv.Gone += fmt.Sprintf("; its QEMU (pid %d) still runs", qemuPid)
	}
	return lv
}

// askStatus asks the supervisor in dir for its status on the control
// socket.
func askStatus(ctx context.Context, dir string) (*Status, error) {
	ctx, cancel := context.WithTimeout(ctx, inspectTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", filepath.Join(dir, ControlFile))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if _, err := io.WriteString(conn, "status\n"); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("no answer: %w", err)
	}
	var st Status
	if err := json.Unmarshal(line, &st); err != nil {
		return nil, fmt.Errorf("answer %q: %w", strings.TrimSpace(string(line)), err)
	}
	return &st, nil
}

// Remove ends the sandbox of the supervisor directory dir whatever state
// it is in, and removes the directory: a running supervisor is asked to
// stop (Stop); a supervisor that does not answer is killed; a QEMU left
// running by a killed supervisor is killed with its process group. pid
// and qemuPid are the processes last recorded for dir (zeros when
// unknown; the status file fills them in). Remove returns once no process
// of the sandbox runs; a missing directory is not an error.
func Remove(ctx context.Context, dir string, pid, qemuPid int) error {
	if err := ensureStopped(ctx, dir, pid, qemuPid); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("supervisor: %w", err)
	}
	// The configuration's directory (SandboxDir) goes with its last
	// sandbox; it stays while it holds others.
	os.Remove(filepath.Dir(dir))
	return nil
}

// ensureStopped is Remove without removing the directory: afterwards no
// process of the sandbox runs and no socket is left in dir.
func ensureStopped(ctx context.Context, dir string, pid, qemuPid int) error {
	if st, err := ReadStatus(dir); err == nil {
		if pid == 0 {
			pid = st.Pid
		}
		if qemuPid == 0 || st.Pid == pid {
			qemuPid = st.QEMUPid
		}
	}
	// A supervisor stops its machine within the machine's stop timeout;
	// one that takes much longer is stuck and is killed below, as is one
	// that answered but did not stop cleanly.
	stopCtx, cancel := context.WithTimeout(ctx, removeStopWait)
	Stop(stopCtx, dir)
	cancel()
	if pid != 0 && processAlive(pid) && ownsProcess(dir, pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		waitGone(ctx, pid)
	}
	if qemuPid != 0 && processAlive(qemuPid) && ownsProcess(dir, qemuPid) {
		// QEMU leads its own process group (providers/qemu).
		syscall.Kill(-qemuPid, syscall.SIGKILL)
		syscall.Kill(qemuPid, syscall.SIGKILL)
		if !waitGone(ctx, qemuPid) {
			return fmt.Errorf("supervisor: QEMU (pid %d) of %s is still running after SIGKILL", qemuPid, dir)
		}
	}
	saveConsole(dir)
	for _, name := range []string{SocketFile, ControlFile} {
		os.Remove(filepath.Join(dir, name))
	}
	// Machine directories left by a killed supervisor.
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), "sbx-") {
				os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
	}
	return nil
}

// removeStopWait bounds Remove's wait for a supervisor to stop its
// sandbox before it kills the supervisor and QEMU.
const removeStopWait = 2 * time.Minute

// waitGone waits until pid has exited (or is a zombie) for a few seconds.
func waitGone(ctx context.Context, pid int) bool {
	deadline := time.Now().Add(10 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// namesDir reports whether one of args is dir or a path inside it
// (possibly after a "name=" prefix, as in QEMU's "path=DIR/x.sock").
func namesDir(args [][]byte, dir string) bool {
	d := []byte(filepath.Clean(dir))
	inside := append(append([]byte{}, d...), '/')
	for _, a := range args {
		if bytes.Equal(a, d) || bytes.Contains(a, inside) {
			return true
		}
	}
	return false
}
