//go:build !unix

package plan

import "os"

// Flags for opening what a checkout holds.
const (
	readFlags = os.O_RDONLY
	dirFlags  = os.O_RDONLY
)
