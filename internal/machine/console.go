package machine

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/sbx-dev/sbx/internal/machine/consolelog"
)

// How long the machine waits on its console log.
const (
	// consoleFlushWait bounds the wait for what QEMU has sent so far
	// to be in the log, before the log is read.
	consoleFlushWait = time.Second
	// consoleDrainWait bounds the wait, once QEMU has exited, for the
	// rest of the console to be in the log.
	consoleDrainWait = 5 * time.Second
	// readyWait bounds the wait for the ready line once the agent has
	// answered: the agent writes it before it serves, but it reaches the
	// log through QEMU and the capture.
	readyWait = 2 * time.Second
)

// consoleLink is the host's end of the serial console: the socket QEMU
// connects the console to (ConsoleSocket), and the capture of QEMU's
// connection into the capped log (ConsoleFile and its rotated
// predecessor, package consolelog).
type consoleLink struct {
	path     string
	ln       *net.UnixListener
	log      *consolelog.Writer
	accepted chan struct{} // closed once Accept has returned

	// Set before accepted is closed.
	conn    net.Conn
	capture *consolelog.Capture
	err     error
}

// listenConsole begins the log at logPath, of at most max bytes per file,
// and listens on path for QEMU's console; the first connection is
// captured into the log and the listener closed, path removed.
func listenConsole(path, logPath string, max int64) (*consoleLink, error) {
	log, err := consolelog.Create(logPath, max)
	if err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("console socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	l := &consoleLink{path: path, ln: ln, log: log, accepted: make(chan struct{})}
	go func() {
		defer close(l.accepted)
		conn, err := ln.Accept()
		ln.Close()
		if err != nil {
			l.err = err
			return
		}
		l.conn = conn
		l.capture = consolelog.NewCapture(conn, log, 0)
	}()
	return l, nil
}

// wait waits for QEMU to connect the console: at most until ctx is done
// or QEMU exits. QEMU connects it as it starts, before the network
// device, so by the time that is connected this one is too.
func (l *consoleLink) wait(ctx context.Context, qemuExited <-chan struct{}) error {
	select {
	case <-l.accepted:
	case <-qemuExited:
		select {
		case <-l.accepted:
		default:
			return fmt.Errorf("QEMU exited before it connected the console to %s", l.path)
		}
	case <-ctx.Done():
		return fmt.Errorf("QEMU did not connect the console to %s: %w", l.path, ctx.Err())
	}
	if l.err != nil {
		return fmt.Errorf("console socket %s: %w", l.path, l.err)
	}
	return nil
}

// settle waits a little for the log to hold what QEMU has sent: all of
// it once QEMU has exited, else what has been read so far.
func (l *consoleLink) settle(qemuExited <-chan struct{}) {
	select {
	case <-l.accepted:
	default:
		return
	}
	if l.capture == nil {
		return
	}
	select {
	case <-qemuExited:
		l.capture.Wait(consoleDrainWait)
	default:
		l.capture.Flush(consoleFlushWait)
	}
}

// close ends the capture and closes the log. QEMU has exited or been
// killed: what it sent is read to the end first, as long as that takes
// at most consoleDrainWait.
func (l *consoleLink) close() {
	l.ln.Close()
	<-l.accepted
	if l.capture != nil {
		if !l.capture.Wait(consoleDrainWait) {
			l.conn.Close()
			if !l.capture.Wait(consoleFlushWait) {
				// The log is stuck in a write: leave it to that.
				return
			}
		}
		l.conn.Close()
	}
	l.log.Close()
}
