package supervisor

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// RuntimeBase returns the per-user directory under which supervisors keep
// their directories, from the environment environ (as os.Environ gives
// it): $SBX_RUNTIME_DIR, else $XDG_RUNTIME_DIR/sbx, else sbx-UID in the
// temporary directory.
func RuntimeBase(environ []string) string {
	get := func(name string) string {
		for i := len(environ) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(environ[i], name+"="); ok {
				return v
			}
		}
		return ""
	}
	if d := get("SBX_RUNTIME_DIR"); d != "" {
		return d
	}
	if d := get("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "sbx")
	}
	tmp := get("TMPDIR")
	if tmp == "" {
		tmp = os.TempDir()
	}
	return filepath.Join(tmp, "sbx-"+strconv.Itoa(os.Getuid()))
}

// SandboxDir returns the supervisor directory of the sandbox name of the
// configuration in configDir, under base (see RuntimeBase):
// base/<12 hex digits of the hash of configDir's absolute path>/name. The
// hash keeps the path short whatever configDir is, since the unix socket
// paths inside it are limited to about 100 bytes; a path that would still
// be too long is an error.
func SandboxDir(base, configDir, name string) (string, error) {
	abs, err := filepath.Abs(configDir)
	if err != nil {
		return "", fmt.Errorf("supervisor: %w", err)
	}
	sum := sha256.Sum256([]byte(abs))
	dir := filepath.Join(base, hex.EncodeToString(sum[:6]), name)
	// The longest socket path Run makes is the machine's, inside its own
	// directory: dir/sbx-<10 digits>/control.sock.
	if n := len(dir) + len("/sbx-0123456789/") + len("control.sock"); n > maxSocketPath {
		return "", fmt.Errorf("supervisor: the runtime directory %s is too long for unix socket paths (%d bytes, at most %d); set SBX_RUNTIME_DIR to a shorter one", base, n, maxSocketPath)
	}
	return dir, nil
}

// maxSocketPath is the longest unix socket path every host takes (macOS's
// sun_path is 104 bytes with its terminating NUL).
const maxSocketPath = 103
