package supervisor

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"syscall"
)

// PeerError is the error for a unix socket whose other end is a process of
// another user: a client the supervisor refuses, or a server its clients
// refuse before they send anything.
type PeerError struct {
	Path   string // the socket
	UID    int    // the peer's user id
	Client bool   // the peer is a client (else the server)
}

func (e *PeerError) Error() string {
	if e.Client {
		return fmt.Sprintf("supervisor: %s: refused a client of uid %d, not of this user (uid %d)", e.Path, e.UID, os.Geteuid())
	}
	return fmt.Sprintf("supervisor: %s is served by uid %d, not by you (uid %d); refusing to use it", e.Path, e.UID, os.Geteuid())
}

// checkPeer makes sure the process at the other end of conn, a unix
// socket at path, runs as this process's effective user.
// client says which end conn's peer is, for the error.
func checkPeer(conn net.Conn, path string, client bool) error {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return fmt.Errorf("supervisor: %s: %T is not a socket", path, conn)
	}
	uid, err := peerUID(sc)
	if err != nil {
		return fmt.Errorf("supervisor: %s: the peer's user: %w", path, err)
	}
	if uid != os.Geteuid() {
		return &PeerError{Path: path, UID: uid, Client: client}
	}
	return nil
}

// dialVerified connects to the unix socket at path and returns the
// connection only when the process serving it runs as this user; then
// nothing has been sent on it. Errors from the dial itself are returned
// as they are (so that errors.Is finds fs.ErrNotExist and
// syscall.ECONNREFUSED); a server of another user is a *PeerError.
func dialVerified(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	if err := checkPeer(conn, path, false); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// listenPrivate listens on the unix socket path, makes the socket file
// readable and writable by this user alone (0600), and accepts only
// clients that run as this user (ownerListener).
func listenPrivate(path string, log *slog.Logger) (net.Listener, error) {
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return &ownerListener{Listener: l, path: path, log: log}, nil
}

// ownerListener accepts only connections from processes of this user:
// others are closed at once, before anything is read from or written to
// them, and logged.
type ownerListener struct {
	net.Listener
	path string
	log  *slog.Logger
}

func (l *ownerListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if err := checkPeer(conn, l.path, true); err != nil {
			l.log.Warn("refused a client of another user", "socket", l.path, "error", err)
			conn.Close()
			continue
		}
		return conn, nil
	}
}

// sockoptUID returns the user id get reads from conn's socket (a
// platform's peer-credential option, named opt in errors).
func sockoptUID(conn syscall.Conn, opt string, get func(fd int) (uint32, error)) (int, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return -1, err
	}
	var uid uint32
	var getErr error
	if err := raw.Control(func(fd uintptr) { uid, getErr = get(int(fd)) }); err != nil {
		return -1, err
	}
	if getErr != nil {
		return -1, fmt.Errorf("%s: %w", opt, getErr)
	}
	return int(uid), nil
}
