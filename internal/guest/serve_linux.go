package guest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbx-dev/sbx/internal/guest/execsrv"
	"github.com/sbx-dev/sbx/internal/guest/guestcfg"
	"github.com/sbx-dev/sbx/internal/guest/vfsmount"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
	"golang.org/x/sys/unix"
)

// portWait is how long serve waits for its virtio-serial ports to appear
// once the boot has loaded virtio_console.
const portWait = 10 * time.Second

// software names the agent in its hello.
const software = "sbx-guest"

// startReaper starts PID 1's reaper, the one place that waits for
// children, and returns it for the exec server.
func startReaper() (execsrv.Reaper, func()) {
	r := execsrv.NewInitReaper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, time.Second)
	}()
	return r, func() {
		cancel()
		<-done
	}
}

// serve runs the agent protocol on the agent port, serving one host
// connection after another, until the host writes a power-off request
// on the control port or ctx ends. It then ends every process in the
// guest so that the power-off finds the disk idle.
func serve(ctx context.Context, root string, console *lockedWriter, reaper execsrv.Reaper, poll time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, problem := range prepareDev(root) {
		console.WriteString(bootproto.WarningLine(problem))
	}
	agent, err := bootproto.FindPort(ctx, root, bootproto.AgentPort, portWait, poll)
	if err != nil {
		return err
	}
	control, err := bootproto.FindPort(ctx, root, bootproto.ControlPort, portWait, poll)
	if err != nil {
		return err
	}
	go func() {
		err := watchControl(ctx, control, console, cancel)
		if err != nil && ctx.Err() == nil {
			console.WriteString(bootproto.WarningLine("control port: " + err.Error()))
		}
	}()

	// One configuration for every connection: the supervisor that
	// configures the guest may reconnect, and its placeholders and
	// network must stay.
	cfg := guestcfg.New(guestcfg.Options{Root: root, Step: func(step string) {
		console.WriteString(bootproto.StepLine(step))
	}})
	opts := execsrv.Options{Root: root, Reaper: reaper, Software: software, Configurer: cfg}
	for ctx.Err() == nil {
		f, err := reopenPort(ctx, agent, console)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
		if err := execsrv.Serve(ctx, f, opts); err != nil && ctx.Err() == nil && !errors.Is(err, execsrv.ErrTakenOver) {
			console.WriteString(bootproto.WarningLine(err.Error()))
		}
	}
	endProcesses()
	return nil
}

// endProcesses asks every process but PID 1 to terminate, gives them a
// moment, and kills those left. The mounts' relay processes ignore the
// request (vfsmount.RunRelay): what the others left in the mounts' page
// cache is written through them first, then they are killed too. PID
// 1's reaper collects them all.
func endProcesses() {
	if err := unix.Kill(-1, unix.SIGTERM); errors.Is(err, unix.ESRCH) {
		return
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && othersAlive() {
		time.Sleep(50 * time.Millisecond)
	}
	unix.Sync()
	unix.Kill(-1, unix.SIGKILL)
}

// othersAlive reports whether a process other than PID 1, the mounts'
// relays and the kernel's threads remains.
func othersAlive() bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Name() == "1" || strings.TrimLeft(e.Name(), "0123456789") != "" {
			continue
		}
		// Kernel threads have an empty command line; zombies too, and
		// the reaper takes those.
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && len(b) > 0 && !isRelay(b) {
			return true
		}
	}
	return false
}

// isRelay reports whether a process's command line (NUL-separated) is a
// mount's relay's. A process that only says so is killed with the
// relays, a moment earlier than it would have been.
func isRelay(cmdline []byte) bool {
	args := strings.Split(string(cmdline), "\x00")
	return len(args) > 1 && args[1] == vfsmount.RelayArg
}

// reopenWait bounds how long reopenPort retries a port that will not
// open before the agent gives up (and the machine powers off).
const reopenWait = 10 * time.Second

// reopenPort is openPort, retried for a while: between two host
// connections the port can refuse to open for a moment (EBUSY while the
// kernel still holds the previous open), and a sandbox must not power
// off for that.
func reopenPort(ctx context.Context, dev string, console *lockedWriter) (*os.File, error) {
	deadline := time.Now().Add(reopenWait)
	for {
		f, err := openPort(ctx, dev)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return f, err
		}
		console.WriteString(bootproto.WarningLine(fmt.Sprintf("reopening %s: %v; trying again", dev, err)))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// openPort opens a virtio-serial port and returns it once the host has
// connected and sent something. While no host is connected a read of the
// port returns end-of-file at once, and poll reports a hang-up, so this
// waits with poll rather than in a read.
func openPort(ctx context.Context, dev string) (*os.File, error) {
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dev, Err: err}
	}
	if err := waitReadable(ctx, fd); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), dev), nil
}

// waitReadable waits until fd has data, sleeping while the host end is
// not connected.
func waitReadable(ctx context.Context, fd int) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 200)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		if n == 0 {
			continue
		}
		if fds[0].Revents&unix.POLLIN != 0 {
			return nil
		}
		// POLLHUP: no host connected. Look again shortly.
		time.Sleep(50 * time.Millisecond)
	}
}

// watchControl reads control lines from the control port and calls
// powerOff on a power-off request.
func watchControl(ctx context.Context, dev string, console *lockedWriter, powerOff func()) error {
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dev, Err: err}
	}
	defer unix.Close(fd)
	var line []byte
	buf := make([]byte, 512)
	for {
		if err := waitReadable(ctx, fd); err != nil {
			return err
		}
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "read", Path: dev, Err: err}
		}
		if n == 0 {
			// The host hung up; wait for the next one.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		line = append(line, buf[:n]...)
		for {
			i := strings.IndexByte(string(line), '\n')
			if i < 0 {
				break
			}
			req, err := bootproto.ParseControl(string(line[:i]))
			line = line[i+1:]
			if err != nil {
				console.WriteString(bootproto.WarningLine(err.Error()))
				continue
			}
			if req == bootproto.ControlPowerOff {
				powerOff()
				return nil
			}
		}
		if len(line) > 4096 {
			line = line[:0]
		}
	}
}

// prepareDev completes /dev for the processes the host runs, as udev and
// systemd would: pseudo-terminals (devpts at /dev/pts, which /dev/ptmx
// opens into), POSIX shared memory (a tmpfs at /dev/shm) and the /dev/fd,
// stdin, stdout and stderr links. It returns what it could not do; none
// of it stops the agent from serving.
func prepareDev(root string) []string {
	var problems []string
	mount := func(source, target, fstype, data string, mode os.FileMode) {
		dir := filepath.Join(root, target)
		if err := os.MkdirAll(dir, mode); err != nil {
			problems = append(problems, err.Error())
			return
		}
		err := unix.Mount(source, dir, fstype, unix.MS_NOSUID|unix.MS_NOEXEC, data)
		if err != nil && !errors.Is(err, unix.EBUSY) {
			problems = append(problems, fmt.Sprintf("mounting %s on %s: %v", fstype, target, err))
		}
	}
	mount("devpts", "/dev/pts", "devpts", "newinstance,ptmxmode=0666,mode=0620", 0o755)
	mount("shm", "/dev/shm", "tmpfs", "mode=1777", 0o1777)
	for link, target := range map[string]string{
		"/dev/fd": "/proc/self/fd", "/dev/stdin": "/proc/self/fd/0",
		"/dev/stdout": "/proc/self/fd/1", "/dev/stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil && !errors.Is(err, os.ErrExist) {
			problems = append(problems, err.Error())
		}
	}
	// A /dev/ptmx left by devtmpfs opens the devpts instance beside it;
	// make it the link to that instance's own ptmx when it is missing.
	if _, err := os.Lstat(filepath.Join(root, "/dev/ptmx")); errors.Is(err, os.ErrNotExist) {
		if err := os.Symlink("pts/ptmx", filepath.Join(root, "/dev/ptmx")); err != nil {
			problems = append(problems, err.Error())
		}
	}
	return problems
}
