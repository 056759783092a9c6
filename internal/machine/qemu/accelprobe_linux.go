package qemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// accelProbeResult is the outcome of running a test guest.
type accelProbeResult struct {
	OK      bool
	Detail  string // why not, for the note
	Elapsed time.Duration
}

// probeGuestExit is the status QEMU exits with when the x86 test guest
// writes 0x31 to isa-debug-exit: (0x31 << 1) | 1.
const probeGuestExit = 99

// runAccelProbe runs a test guest under accel with the emulator at qemu
// and reports whether it ran to its end within timeout. QEMU is killed
// when the time is up; the call returns within about timeout.
//
// On x86 the guest is kvmProbeGuest: it must reach 64-bit mode, run a
// loop and exit QEMU, which needs the vCPU to really execute (a KVM that
// opens but cannot run guests fails here). On other architectures only
// QEMU's start with the accelerator and "-cpu host" is checked.
func runAccelProbe(ctx context.Context, qemu string, accel Accel, timeout time.Duration) accelProbeResult {
	dir, err := os.MkdirTemp("", "sbx-accel-probe-")
	if err != nil {
		return accelProbeResult{Detail: fmt.Sprintf("cannot make a directory for the test guest: %v", err)}
	}
	defer os.RemoveAll(dir)
	cpu := "host"
	if accel == AccelTCG {
		cpu = "max"
	}
	args := []string{"-no-user-config", "-nodefaults", "-display", "none", "-no-reboot",
		"-accel", string(accel), "-cpu", cpu, "-m", "16"}
	x86 := runtime.GOARCH == "amd64"
	dcon := filepath.Join(dir, "debugcon.log")
	if x86 {
		img := filepath.Join(dir, "probe.bin")
		if err := os.WriteFile(img, kvmProbeGuest, 0o644); err != nil {
			return accelProbeResult{Detail: fmt.Sprintf("cannot write the test guest: %v", err)}
		}
		args = append(args, "-machine", "q35",
			"-chardev", "file,id=dbg,path="+optValue(dcon),
			"-device", "isa-debugcon,iobase=0x402,chardev=dbg",
			"-device", "isa-debug-exit,iobase=0xf4,iosize=1",
			"-kernel", img)
	} else {
		args = append(args, "-machine", "virt", "-S")
	}
	var stderr bytes.Buffer
	cmd := exec.Command(qemu, args...)
	cmd.Env = Environment(os.Environ())
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return accelProbeResult{Detail: fmt.Sprintf("cannot start %s: %v", qemu, err)}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	limit := timeout
	if !x86 {
		// A QEMU that cannot use the accelerator exits at once.
		limit = min(timeout, time.Second)
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	var waitErr error
	exited, cancelled := false, false
	select {
	case waitErr = <-done:
		exited = true
	case <-timer.C:
	case <-ctx.Done():
		cancelled = true
	}
	elapsed := time.Since(start)
	if !exited {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		waitErr = <-done
	}
	r := accelProbeResult{Elapsed: elapsed}
	name := strings.ToUpper(string(accel))
	switch {
	case cancelled:
		r.Detail = "the probe was cancelled"
	case !x86 && !exited:
		r.OK = true
	case !x86:
		r.Detail = fmt.Sprintf("QEMU did not start under %s: %s", name, qemuExit(waitErr, stderr.String()))
	case !exited:
		con, _ := os.ReadFile(dcon)
		r.Detail = fmt.Sprintf("a test guest made no progress to its end in %v under %s (%s)", timeout, name, guestProgress(con))
	default:
		con, _ := os.ReadFile(dcon)
		var ee *exec.ExitError
		if errors.As(waitErr, &ee) && ee.ExitCode() == probeGuestExit && bytes.HasSuffix(con, []byte("PLD\n")) {
			r.OK = true
		} else {
			r.Detail = fmt.Sprintf("QEMU failed on a test guest under %s: %s", name, qemuExit(waitErr, stderr.String()))
		}
	}
	return r
}

// guestProgress says how far the test guest got, from its debug console:
// the firmware's messages, then "P" (32-bit mode), "L" (64-bit mode) and
// "D\n" (done) on a line of their own.
func guestProgress(con []byte) string {
	last := con
	if i := bytes.LastIndexByte(con, '\n'); i >= 0 {
		last = con[i+1:]
	}
	switch {
	case bytes.HasSuffix(con, []byte("PLD\n")):
		return "it finished"
	case string(last) == "PL":
		return "it reached 64-bit mode and stalled there"
	case string(last) == "P":
		return "it reached 32-bit mode and stalled there"
	case len(con) > 0:
		return "the firmware ran but the guest did not start"
	default:
		return "not even the firmware ran"
	}
}
