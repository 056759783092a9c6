//go:build unix

package oauth

import (
	"fmt"
	"os"
	"syscall"
)

// openLockFile opens (making it, mode 0600) the lock file at path
// without following a symbolic link there: a link planted beside the
// credential file must not make sbx create or lock a file elsewhere.
// Anything but a regular file is refused.
func openLockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f, nil
}

// lockFile takes an exclusive flock on f, waiting for it. An flock
// belongs to the open file, so it excludes every other open of the lock
// file: another process's, and another Login's in this one.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}

func unlockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
