package ca

import (
	"os"

	"golang.org/x/sys/unix"
)

// flock takes an exclusive lock on f, held until f is closed. flock locks
// belong to the open file, so two goroutines of one process that each
// open the lock file exclude each other as two processes do.
func flock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			return err
		}
	}
}
