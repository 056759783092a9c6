//go:build !(linux || darwin || freebsd)

package qcow2

import "io"

// fileExtents cannot ask this system for holes; every byte may be data.
func fileExtents(io.ReaderAt, int64) ([]extent, bool) { return nil, false }
