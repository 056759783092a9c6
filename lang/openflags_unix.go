//go:build unix

package lang

import (
	"os"
	"syscall"
)

// readOnlyFlags opens a file named by the configuration for reading
// without waiting: a named pipe in an untrusted checkout would otherwise
// block the open until something writes to it, and the file is refused
// as not regular right after.
const readOnlyFlags = os.O_RDONLY | syscall.O_NONBLOCK
