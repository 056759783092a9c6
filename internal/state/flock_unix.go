//go:build unix

package state

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive flock on f without blocking; held reports
// that another open file holds it.
func tryLock(f *os.File) (held bool, err error) {
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return true, nil
		}
		return false, err
	}
}

func unlock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// ownedSingleLink reports whether f is owned by this process's user and
// has exactly one name: only such a lock file is written to, so a hard
// link to someone else's file (or another of the user's own) is never
// changed.
func ownedSingleLink(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 1 && int(st.Uid) == os.Geteuid()
}
