package vfsmount

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

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
func mountOn(ctx context.Context, port *os.File, guestPath string, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(guestPath, 0o755); err != nil {
		return fmt.Errorf("mount %s: %w", guestPath, err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("mount %s: socket pair: %w", guestPath, err)
	}
	kernelFD := fds[0]
	sock := os.NewFile(uintptr(fds[1]), "vfs relay")
	// The kernel's client speaks as soon as mount(2) is called and waits
	// for answers, so the relay runs first.
	r, err := startRelayProcess(guestPath, port, sock)
	sock.Close() // the relay process holds its own
	if err != nil {
		unix.Close(kernelFD)
		return fmt.Errorf("mount %s: %w", guestPath, err)
	}
	data, err := vfsproto.MountData(kernelFD, kernelFD, opts.Msize, opts.Cache)
	if err != nil {
		r.stop()
		r.proc.Release()
		unix.Close(kernelFD)
		return err
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if opts.ReadOnly {
		flags |= unix.MS_RDONLY
	}
	err = unix.Mount("sbx", guestPath, "9p", flags, data)
	// The kernel holds its own reference to the socket now.
	unix.Close(kernelFD)
	if err != nil {
		r.stop()
		<-r.done
		r.proc.Release()
		return fmt.Errorf("mount %s: mount -t 9p -o %s: %w", guestPath, data, err)
	}
	go func() {
		select {
		case <-ctx.Done():
			r.stop()
		case <-r.done:
		}
		<-r.done
		log.Info("vfs relay ended", "path", guestPath, "pid", r.proc.Pid, "error", r.err)
		r.proc.Release()
	}()
	return nil
}

// relayProcess is a relay running in a process of its own (RunRelay),
// started by startRelayProcess.
type relayProcess struct {
	proc *os.Process
	// done is closed when the process has ended (its end of the
	// status pipe closed); err is what it reported, nil for a clean
	// end.
	done chan struct{}
	err  error
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
		b, _ := io.ReadAll(io.LimitReader(statusR, 4096))
		statusR.Close()
		if msg := strings.TrimSpace(string(b)); msg != "" {
			r.err = fmt.Errorf("relay: %s", msg)
		}
	}()
	return r, nil
}

// stop kills the relay process; its end closes both connections.
func (r *relayProcess) stop() {
	// Through the process's pidfd: a process that has ended and been
	// reaped is not hit again, nor one that reused its id.
	r.proc.Signal(unix.SIGKILL)
}
