package vfsmount

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/proto/vfsproto"
)

// Mount mounts the file system served on the virtio-serial port device
// portPath (such as /dev/vport0p3) at guestPath, making guestPath (mode
// 0755) if needed. It returns once the kernel has mounted it; the relay
// process then runs until ctx is done or either end closes, after which
// the mount's operations fail (EIO) until it is unmounted.
func Mount(ctx context.Context, portPath, guestPath string, opts Options) error {
	port, err := os.OpenFile(portPath, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("mount %s: %w", guestPath, err)
	}
	defer port.Close() // the relay process holds its own
	return mountOn(ctx, port, guestPath, opts)
}

// mountOn mounts the file system spoken on port at guestPath, relaying
// between port and the kernel's socket in a relay process.
//
// The kernel's mount(2) waits for the host's answers with no bound of
// its own, so mountOn gives it opts.Timeout (vfsproto.MountTimeout):
// then the relay is killed, the kernel's side of its socket ends and
// the mount fails, with an error that says what the relay carried (its
// Counts). One more attempt, with a fresh relay, is made only when the
// relay never wrote the kernel's request to the port (it never
// reported relaying, or the kernel's first bytes never left it): the
// host's end of the port has then seen nothing of the first attempt,
// and a fresh version request starts its stream as cleanly as the
// first would have. Once the request has gone to the port, it is not
// sent again: the host may hold part of it, or have answered it, and
// its late answer would be taken for the new request's, out of step
// with the host from then on.
func mountOn(ctx context.Context, port *os.File, guestPath string, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(guestPath, 0o755); err != nil {
		return fmt.Errorf("mount %s: %w", guestPath, err)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = vfsproto.MountTimeout
	}
	var earlier []string
	for attempt := 1; ; attempt++ {
		again, err := mountOnce(ctx, port, guestPath, opts, timeout, log)
		if err != nil && len(earlier) > 0 {
			err = fmt.Errorf("%w (attempt %d, with a fresh relay; before it: %s)", err, attempt, strings.Join(earlier, "; "))
		}
		if !again || attempt >= vfsproto.MountAttempts {
			return err
		}
		log.Warn("vfs mount: trying again with a fresh relay", "path", guestPath, "error", err)
		earlier = append(earlier, err.Error())
	}
}

// killWait bounds the wait for the kernel's mount to fail once its
// relay is killed.
const killWait = 10 * time.Second

// sysMount is mount(2); tests replace it with a stand-in for the
// kernel's 9p client.
var sysMount = unix.Mount

// mountOnce is one attempt of mountOn. It reports whether another
// attempt may be made.
func mountOnce(ctx context.Context, port *os.File, guestPath string, opts Options, timeout time.Duration, log *slog.Logger) (again bool, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("mount %s: socket pair: %w", guestPath, err)
	}
	kernelFD := fds[0]
	sock := os.NewFile(uintptr(fds[1]), "vfs relay")
	// The kernel's client speaks as soon as mount(2) is called and waits
	// for answers, so the relay runs first.
	r, err := startRelayProcess(guestPath, port, sock)
	sock.Close() // the relay process holds its own
	if err != nil {
		unix.Close(kernelFD)
		return false, fmt.Errorf("mount %s: %w", guestPath, err)
	}
	data, err := vfsproto.MountData(kernelFD, kernelFD, opts.Msize, opts.Cache)
	if err != nil {
		r.stop()
		r.proc.Release()
		unix.Close(kernelFD)
		return false, err
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if opts.ReadOnly {
		flags |= unix.MS_RDONLY
	}
	mounted := make(chan error, 1)
	go func() {
		err := sysMount("sbx", guestPath, "9p", flags, data)
		// The kernel holds its own reference to the socket now.
		unix.Close(kernelFD)
		mounted <- err
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err = <-mounted:
	case <-timer.C:
		// The relay's end closing ends the kernel's connection, and
		// with it the mount's wait.
		r.stop()
		st := r.status()
		select {
		case err := <-mounted:
			if err == nil {
				// Mounted as the relay died: a mount of nothing.
				unix.Unmount(guestPath, unix.MNT_DETACH)
			}
		case <-time.After(killWait):
		}
		select {
		case <-r.done:
			st = r.status()
		case <-time.After(killWait):
		}
		r.proc.Release()
		var why string
		if !st.relaying {
			why = "the relay process never reported that it was relaying"
		} else {
			why = st.counts.String()
		}
		again = !st.relaying || st.counts.ToPort == 0
		return again, fmt.Errorf("mount %s: the kernel's mount did not finish within %v: %s", guestPath, timeout, why)
	}
	if err != nil {
		r.stop()
		<-r.done
		r.proc.Release()
		return false, fmt.Errorf("mount %s: mount -t 9p -o %s: %w", guestPath, data, err)
	}
	go func() {
		select {
		case <-ctx.Done():
			r.stop()
		case <-r.done:
		}
		<-r.done
		log.Info("vfs relay ended", "path", guestPath, "pid", r.proc.Pid, "error", r.status().err)
		r.proc.Release()
	}()
	return false, nil
}

// relayProcess is a relay running in a process of its own (RunRelay),
// started by startRelayProcess.
type relayProcess struct {
	proc *os.Process
	// done is closed when the process has ended (its end of the
	// status pipe closed).
	done chan struct{}

	mu sync.Mutex
	st relayStatus // what it has reported so far; st.err nil for a clean end
}

// status returns what the relay process has reported so far.
func (r *relayProcess) status() relayStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

// startRelayProcess starts this executable with RelayArg as the relay
// between port and sock (RunRelay), handing it both and the write end of
// a pipe on which it reports how the relay ended. The caller closes its
// own copies afterwards, so that the relay's end is the end of both
// connections.
//
// /proc/self/exe is the agent's binary wherever its root is now; the
// relay starts from the root file system, never from a mount, so
// starting it cannot wait on a relay.
func startRelayProcess(guestPath string, port, sock *os.File) (*relayProcess, error) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("starting the relay: %w", err)
	}
	defer null.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("relay status pipe: %w", err)
	}
	defer statusW.Close()
	// The child's descriptors 3, 4 and 5 are relayPortFD, relaySockFD
	// and relayStatusFD; its standard streams /dev/null, but for a
	// panic's trace, which goes where the agent's own stderr goes (the
	// console).
	attr := &os.ProcAttr{
		Dir:   "/",
		Env:   []string{},
		Files: []*os.File{null, null, os.Stderr, port, sock, statusW},
		Sys:   &unix.SysProcAttr{Setsid: true},
	}
	proc, err := os.StartProcess("/proc/self/exe", []string{"/proc/self/exe", RelayArg, guestPath}, attr)
	if err != nil {
		statusR.Close()
		return nil, fmt.Errorf("starting the relay: %w", err)
	}
	r := &relayProcess{proc: proc, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		parseStatus(statusR, func(st relayStatus) {
			r.mu.Lock()
			r.st = st
			r.mu.Unlock()
		})
		// A status line too long to parse leaves the rest unread.
		io.Copy(io.Discard, statusR)
		statusR.Close()
	}()
	return r, nil
}

// stop kills the relay process; its end closes both connections.
func (r *relayProcess) stop() {
	// Through the process's pidfd: a process that has ended and been
	// reaped is not hit again, nor one that reused its id.
	r.proc.Signal(unix.SIGKILL)
}
