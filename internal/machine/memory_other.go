//go:build !linux

package machine

import (
	"errors"
	"os"
)

// SealMemory needs Linux's sealed memory files; elsewhere there are no
// warm starts yet.
func SealMemory(src *os.File, sum func(off int64, b []byte)) (*os.File, error) {
	return nil, errors.New("machine: resuming a saved machine needs Linux")
}

func checkSealed(f *os.File) error {
	return errors.New("machine: resuming a saved machine needs Linux")
}

func sharedMemory(size int64, saved *os.File) (*os.File, error) {
	return nil, errors.New("machine: file system devices need Linux's memory files")
}
