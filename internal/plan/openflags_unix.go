//go:build unix

package plan

import (
	"os"
	"syscall"
)

// Flags for opening what a checkout holds without waiting: a named pipe
// planted where a file or directory was listed would otherwise block the
// open until something writes to it.
const (
	readFlags = os.O_RDONLY | syscall.O_NONBLOCK
	dirFlags  = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_DIRECTORY
)
