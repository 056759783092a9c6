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
