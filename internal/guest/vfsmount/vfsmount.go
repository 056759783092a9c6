package vfsmount

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
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
	// Timeout bounds each attempt of the kernel's mount; zero means
	// vfsproto.MountTimeout.
	Timeout time.Duration
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
// either ends, and returns the process's exit code. On its status pipe
// it writes one line per event (parseStatus reads them): "relaying"
// once it copies, a "counts" line after each read and write of its
// first countedBytes each way (what carried the mount's handshake, for
// a mount that does not finish), and "error" with why it ended, if not
// cleanly. The signals that end processes at power-off other than
// SIGKILL are ignored: the agent ends the relays last, once the mounts'
// pages are written.
func RunRelay() int {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// A guest that runs out of memory must not lose its mounts: the
	// agent, PID 1, is exempt from the OOM killer, and so is its relay.
	// (As root; a test that is not root keeps its score.)
	os.WriteFile("/proc/self/oom_score_adj", []byte("-1000\n"), 0)
	// Writes of whole short lines to a pipe with room are atomic; with
	// no room they fail at once rather than wait (statusWriter).
	syscall.SetNonblock(relayStatusFD, true)
	status := &statusWriter{fd: relayStatusFD}
	fail := func(err error) int {
		status.last(statusError + " " + oneLine(err.Error()))
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
	r := newRelay(port, sock)
	r.progress = func(c Counts) { status.line(c.line()) }
	status.last(statusRelaying)
	r.start()
	<-r.done
	if r.err != nil {
		return fail(r.err)
	}
	return 0
}

// Lines of a relay's status pipe.
const (
	statusRelaying = "relaying"
	statusCounts   = "counts"
	statusError    = "error"
)

// statusWriter writes whole lines on a relay's status pipe, one at a
// time, without ever waiting for the agent to read them: the agent may
// not run for a while (it waits, in a vfork, for a command stored on
// the mount to start, which needs the relay), and a relay blocked on
// its status pipe would carry nothing. A counts line the pipe has no
// room for is dropped (the next one carries the same totals); the last
// line, why the relay ended, is given a moment.
type statusWriter struct {
	mu sync.Mutex
	fd int
}

// line writes l; it reports whether it went.
func (s *statusWriter) line(l string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := []byte(l + "\n")
	for len(b) > 0 {
		n, err := syscall.Write(s.fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return false
		}
		b = b[n:]
	}
	return true
}

// last writes l, waiting up to a second for room.
func (s *statusWriter) last(l string) {
	for i := 0; i < 100 && !s.line(l); i++ {
		time.Sleep(10 * time.Millisecond)
	}
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " / ") }

// countedBytes is how much of each direction a relay counts (and
// reports): the start of the mount, its version, attach and first
// requests, many times over. After it the copies are no longer counted,
// so that they can splice.
const countedBytes = 64 << 10

// Counts are what a relay has carried of its first countedBytes each
// way: bytes read from the kernel's socket and written to the port (the
// guest's requests), and read from the port and written to the kernel's
// socket (the host's answers).
type Counts struct {
	FromKernel, ToPort, FromPort, ToKernel int64
}

func (c Counts) line() string {
	return fmt.Sprintf("%s %d %d %d %d", statusCounts, c.FromKernel, c.ToPort, c.FromPort, c.ToKernel)
}

// String says what c means for a mount that waits on its first answer.
func (c Counts) String() string {
	s := fmt.Sprintf("the relay read %d bytes from the kernel and wrote %d to the port; it read %d from the port and wrote %d to the kernel",
		c.FromKernel, c.ToPort, c.FromPort, c.ToKernel)
	switch {
	case c.FromKernel == 0:
		s += " (the kernel sent no request)"
	case c.ToPort < c.FromKernel:
		s += " (the port did not take the kernel's request: is the host's end connected?)"
	case c.FromPort == 0:
		s += " (the request went to the host; no answer came back)"
	case c.ToKernel < c.FromPort:
		s += " (the kernel's socket did not take the host's answer)"
	}
	return s
}

// relayStatus is what a relay process has reported on its status pipe.
type relayStatus struct {
	relaying bool
	counts   Counts
	err      error
}

// parseStatus reads a relay's status pipe until it closes, calling
// update after each line with what has been reported so far.
func parseStatus(r io.Reader, update func(relayStatus)) {
	var st relayStatus
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), 4096)
	for sc.Scan() {
		line := sc.Text()
		word, rest, _ := strings.Cut(line, " ")
		switch word {
		case statusRelaying:
			st.relaying = true
		case statusCounts:
			var c Counts
			if _, err := fmt.Sscan(rest, &c.FromKernel, &c.ToPort, &c.FromPort, &c.ToKernel); err == nil {
				st.counts = c
			}
		case statusError:
			st.err = fmt.Errorf("relay: %s", rest)
		default:
			// A panic's trace goes to the console, not here; anything
			// else is an error of its own.
			st.err = fmt.Errorf("relay: %s", line)
		}
		update(st)
	}
}

// relay copies between the port and the kernel's socket until either
// side ends or stop is called; done is closed when both directions have
// ended. It counts the first countedBytes of each direction, calling
// progress (when set) after each count changes.
type relay struct {
	port, sock io.ReadWriteCloser
	once       sync.Once
	done       chan struct{}
	err        error

	progress func(Counts)
	mu       sync.Mutex
	counts   Counts
}

func startRelay(port, sock io.ReadWriteCloser) *relay {
	r := newRelay(port, sock)
	r.start()
	return r
}

func newRelay(port, sock io.ReadWriteCloser) *relay {
	return &relay{port: port, sock: sock, done: make(chan struct{})}
}

func (r *relay) start() {
	var wg sync.WaitGroup
	wg.Add(2)
	copyOne := func(dst io.Writer, src io.Reader, read, written func(*Counts) *int64, what string) {
		defer wg.Done()
		eof, err := r.countedCopy(dst, src, read, written)
		if err == nil && !eof {
			_, err = io.Copy(dst, src)
		}
		if err != nil && !errors.Is(err, os.ErrClosed) {
			r.once.Do(func() { r.err = fmt.Errorf("%s: %w", what, err) })
		}
		// One direction ending ends the other.
		r.stop()
	}
	go copyOne(r.sock, r.port, func(c *Counts) *int64 { return &c.FromPort }, func(c *Counts) *int64 { return &c.ToKernel }, "host to kernel")
	go copyOne(r.port, r.sock, func(c *Counts) *int64 { return &c.FromKernel }, func(c *Counts) *int64 { return &c.ToPort }, "kernel to host")
	go func() {
		wg.Wait()
		close(r.done)
	}()
}

// countedCopy copies the first countedBytes from src to dst, adding
// what it reads and writes to the counts read and written pick. It
// reports whether src ended.
func (r *relay) countedCopy(dst io.Writer, src io.Reader, read, written func(*Counts) *int64) (eof bool, err error) {
	buf := make([]byte, 32<<10)
	var total int64
	add := func(field func(*Counts) *int64, n int) {
		r.mu.Lock()
		*field(&r.counts) += int64(n)
		c := r.counts
		r.mu.Unlock()
		if r.progress != nil {
			r.progress(c)
		}
	}
	for total < countedBytes {
		n, rerr := src.Read(buf[:min(int64(len(buf)), countedBytes-total)])
		if n > 0 {
			total += int64(n)
			add(read, n)
			m, werr := dst.Write(buf[:n])
			add(written, m)
			if werr != nil {
				return false, werr
			}
			if m < n {
				return false, io.ErrShortWrite
			}
		}
		if rerr == io.EOF {
			return true, nil
		}
		if rerr != nil {
			return false, rerr
		}
	}
	return false, nil
}

// Counts returns what the relay has counted so far.
func (r *relay) Counts() Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts
}

func (r *relay) stop() {
	r.port.Close()
	r.sock.Close()
}
