//go:build linux

package supervisor

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerUID returns the effective user id of the process at the other end of
// the unix socket conn: the client's for a server, and for a client, that
// of the process that made the listening socket (SO_PEERCRED).
func peerUID(conn syscall.Conn) (int, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if credErr != nil {
		return -1, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	return int(cred.Uid), nil
}
