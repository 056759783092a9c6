package machine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/netstream"
)

// Network serves a machine's one network device (netstream.Network).
type Network = netstream.Network

// NetStats counts what the guest sent on its network device.
type NetStats = netstream.Stats

// Sink is the Network a machine has when Options.Network is nil: it
// reads every frame the guest sends, counts it and drops it, and never
// sends anything back. The guest has a network device that leads
// nowhere: no address is answered, no packet delivered. A stream that
// breaks its framing (a length over netstream.MaxFrame, a frame cut
// short) ends Serve with an error.
//
// The zero Sink is ready to use. It may serve several connections at
// once; its counts are then their sum.
type Sink struct {
	frames, bytes atomic.Uint64
}

var _ Network = (*Sink)(nil)

// Serve reads and drops conn's frames until it ends (nil), its framing
// breaks or it fails (the error), or ctx is done (ctx's error).
func (s *Sink) Serve(ctx context.Context, conn net.Conn) error {
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	r := netstream.NewReader(conn)
	for {
		frame, err := r.ReadFrame()
		switch {
		case err == io.EOF:
			return nil
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return fmt.Errorf("guest network: %w", err)
		}
		s.frames.Add(1)
		s.bytes.Add(uint64(len(frame)))
	}
}

// Stats returns what the sink has read so far.
func (s *Sink) Stats() NetStats {
	return NetStats{Frames: s.frames.Load(), Bytes: s.bytes.Load()}
}

// netStopWait bounds how long stopping waits for a Network's Serve to
// return once its connection is closed.
const netStopWait = 5 * time.Second

// netLink is the host's end of the machine's network device: the socket
// QEMU connects to, and the Network serving QEMU's connection.
type netLink struct {
	path     string
	ln       *net.UnixListener
	backend  Network
	cancel   context.CancelFunc
	accepted chan struct{} // closed once Accept has returned
	done     chan struct{} // closed once Serve has returned or cannot run

	mu        sync.Mutex
	stopping  bool // the machine is stopping: Serve's end is its doing
	closed    bool
	conn      net.Conn // QEMU's connection, once accepted
	acceptErr error
	err       error // what Serve returned before the machine stopped
}

// listenNet listens on path and serves the first connection made to it
// with backend, in a goroutine of its own. The listener takes just that
// one connection: it is closed, and path removed, once QEMU connects.
func listenNet(path string, backend Network) (*netLink, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("network socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	ctx, cancel := context.WithCancel(context.Background())
	l := &netLink{
		path: path, ln: ln, backend: backend, cancel: cancel,
		accepted: make(chan struct{}), done: make(chan struct{}),
	}
	go l.run(ctx)
	return l, nil
}

func (l *netLink) run(ctx context.Context) {
	defer close(l.done)
	conn, err := l.ln.Accept()
	l.ln.Close()
	l.mu.Lock()
	if conn != nil && l.closed {
		conn.Close()
		conn = nil
	}
	l.conn, l.acceptErr = conn, err
	l.mu.Unlock()
	close(l.accepted)
	if conn == nil {
		return
	}
	err = l.backend.Serve(ctx, conn)
	conn.Close()
	l.mu.Lock()
	if !l.stopping && !errors.Is(err, io.EOF) {
		l.err = err
	}
	l.mu.Unlock()
}

// stop tells the link that the machine is stopping: how Serve ends from
// now on (QEMU gone, maybe in the middle of a frame, or the connection
// closed) is not the Network's failure.
func (l *netLink) stop() {
	l.mu.Lock()
	l.stopping = true
	l.mu.Unlock()
}

// errQEMUExited is wait's error for a QEMU that exited first.
var errQEMUExited = errors.New("QEMU exited before it connected the network device")

// wait waits for QEMU to connect: at most until ctx is done or QEMU
// exits.
func (l *netLink) wait(ctx context.Context, qemuExited <-chan struct{}) error {
	select {
	case <-l.accepted:
	case <-qemuExited:
		select {
		case <-l.accepted:
		default:
			return errQEMUExited
		}
	case <-ctx.Done():
		return fmt.Errorf("QEMU did not connect the network device to %s: %w", l.path, ctx.Err())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return fmt.Errorf("network socket %s: %w", l.path, l.acceptErr)
	}
	return nil
}

// close stops serving: it cancels Serve's context, closes the listener
// and the connection, and waits a little for Serve to return.
func (l *netLink) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed, l.stopping = true, true
	conn := l.conn
	l.mu.Unlock()
	l.cancel()
	l.ln.Close()
	if conn != nil {
		conn.Close()
	}
	select {
	case <-l.done:
	case <-time.After(netStopWait):
		l.mu.Lock()
		l.err = fmt.Errorf("guest network: the backend did not return within %v of its connection closing", netStopWait)
		l.mu.Unlock()
	}
}

// Err returns what Serve ended with before the machine stopped, but for
// io.EOF: QEMU closing the connection.
func (l *netLink) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
