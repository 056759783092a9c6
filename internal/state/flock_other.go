//go:build !unix

package state

import (
	"fmt"
	"os"
	"runtime"
)

func tryLock(*os.File) (bool, error) {
	return false, fmt.Errorf("state locking is not supported on %s", runtime.GOOS)
}

func unlock(*os.File) error { return nil }

// ownedSingleLink reports whether f may hold the holder's record; without
// flock there is no lock to name a holder of.
func ownedSingleLink(*os.File) bool { return false }
