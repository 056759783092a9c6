package vfsmount

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Options configure a mount.
type Options struct {
	// Msize is the largest 9P message; zero means vfsproto.MaxMsize.
	Msize uint32
	// Cache is the 9p client's cache mode (vfsproto.CacheMmap, the
	// default, CacheNone or CacheLoose).
	Cache string
	// ReadOnly mounts read-only in the guest too (the host refuses
	// writes either way; this makes the refusal EROFS before a request
	// is sent).
	ReadOnly bool
	// Logger receives the relay's end; nil discards it.
	Logger *slog.Logger
}

// RelayArg, as the first argument of the agent's binary, makes it a
// mount's relay process (RunRelay) rather than the agent; Mount starts
// it so.
const RelayArg = "sbx-vfs-relay"

// The descriptors a relay process gets from Mount: the port, its end of
// the kernel's socket, and the pipe it reports its end on.
const (
	relayPortFD   = 3
	relaySockFD   = 4
	relayStatusFD = 5
)

// RunRelay is the body of a relay process (see the package's doc): it
// copies between the port and the kernel's socket it was given until
// either ends, writes why it ended, if not cleanly, on its status pipe,
// and returns the process's exit code. The signals that end processes
// at power-off other than SIGKILL are ignored: the agent ends the
// relays last, once the mounts' pages are written.
func RunRelay() int {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// A guest that runs out of memory must not lose its mounts: the
	// agent, PID 1, is exempt from the OOM killer, and so is its relay.
	// (As root; a test that is not root keeps its score.)
	os.WriteFile("/proc/self/oom_score_adj", []byte("-1000\n"), 0)
	status := os.NewFile(relayStatusFD, "relay status")
	fail := func(err error) int {
		if status != nil {
			fmt.Fprintln(status, err)
		}
		return 1
	}
	// The port non-blocking, so that the runtime's poller carries its
	// reads and closing it interrupts them; the socket a net.Conn, as
	// before the relay was a process, so that copies between the two
	// can splice.
	if err := syscall.SetNonblock(relayPortFD, true); err != nil {
		return fail(fmt.Errorf("the port's descriptor: %w", err))
	}
	port := os.NewFile(relayPortFD, "port")
	sockFile := os.NewFile(relaySockFD, "kernel socket")
	sock, err := net.FileConn(sockFile)
	sockFile.Close()
	if err != nil {
		return fail(fmt.Errorf("the kernel's socket: %w", err))
	}
	r := startRelay(port, sock)
	<-r.done
	if r.err != nil {
		return fail(r.err)
	}
	return 0
}

// relay copies between the port and the kernel's socket until either
// side ends or stop is called; done is closed when both directions have
// ended.
type relay struct {
	port, sock io.ReadWriteCloser
	once       sync.Once
	done       chan struct{}
	err        error
}

func startRelay(port, sock io.ReadWriteCloser) *relay {
	r := &relay{port: port, sock: sock, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2)
	copyOne := func(dst io.Writer, src io.Reader, what string) {
		defer wg.Done()
		_, err := io.Copy(dst, src)
		if err != nil && !errors.Is(err, os.ErrClosed) {
			r.once.Do(func() { r.err = fmt.Errorf("%s: %w", what, err) })
		}
		// One direction ending ends the other.
		r.stop()
	}
	go copyOne(sock, port, "host to kernel")
	go copyOne(port, sock, "kernel to host")
	go func() {
		wg.Wait()
		close(r.done)
	}()
	return r
}

func (r *relay) stop() {
	r.port.Close()
	r.sock.Close()
}
