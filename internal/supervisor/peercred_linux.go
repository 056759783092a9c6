//go:build linux

package supervisor

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// peerUID returns the effective user id of the process at the other end of
// the unix socket conn: the client's for a server, and for a client, that
// of the process that made the listening socket (SO_PEERCRED).
func peerUID(conn syscall.Conn) (int, error) {
	return sockoptUID(conn, "SO_PEERCRED", func(fd int) (uint32, error) {
		cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			return 0, err
		}
		return cred.Uid, nil
	})
}
