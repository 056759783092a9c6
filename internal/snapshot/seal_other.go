//go:build !linux

package snapshot

import (
	"errors"
	"os"
)

// sealedCopy needs Linux's sealed memory files; elsewhere a snapshot
// does not load (machines resume on Linux only, package machine).
func sealedCopy(src *os.File, digest string) (*os.File, error) {
	return nil, errors.New("snapshot: loading a saved machine needs Linux")
}
