//go:build !linux && !darwin

package supervisor

import (
	"fmt"
	"runtime"
	"syscall"
)

// peerUID cannot tell who is at the other end of a unix socket on this
// system, so every peer is refused (see checkPeer).
func peerUID(conn syscall.Conn) (int, error) {
	return -1, fmt.Errorf("checking a unix socket peer's user is not supported on %s", runtime.GOOS)
}
