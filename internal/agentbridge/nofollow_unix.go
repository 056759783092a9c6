//go:build unix

package agentbridge

import "syscall"

// noFollow makes an open fail on a symbolic link in the last name.
const noFollow = syscall.O_NOFOLLOW

// nonBlock keeps an open of a FIFO from waiting for a writer.
const nonBlock = syscall.O_NONBLOCK
