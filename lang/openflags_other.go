//go:build !unix

package lang

import "os"

// readOnlyFlags opens a file named by the configuration for reading.
const readOnlyFlags = os.O_RDONLY
