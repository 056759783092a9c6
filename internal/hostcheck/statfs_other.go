//go:build !linux && !darwin

package hostcheck

import (
	"errors"
	"os"
)

func freeBytes(path string) (uint64, error) {
	return 0, errors.New("free space is measured on Linux and macOS only")
}

// writable reports whether the directory path lets its owner write; the
// user is not compared.
func writable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().Perm()&0o200 != 0
}
