package supervisor

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/sbx-dev/sbx/internal/hostenv"
)

// RuntimeBase returns the per-user directory under which supervisors keep
// their directories, from the environment environ (as os.Environ gives
// it): $SBX_RUNTIME_DIR, else $XDG_RUNTIME_DIR/sbx, else sbx/run in the
// user's state directory ($XDG_STATE_HOME, else ~/.local/state) when that
// path is short enough for unix sockets (privateBaseMax), else sbx-UID in
// the temporary directory. It only names the directory: SandboxDir and
// the functions that use a supervisor directory check it (see secureDir),
// since a directory in /tmp may have been made by another user.
func RuntimeBase(environ []string) string {
	get := func(name string) string { return hostenv.Get(environ, name) }
	if d := get("SBX_RUNTIME_DIR"); d != "" {
		return d
	}
	if d := get("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "sbx")
	}
	state := get("XDG_STATE_HOME")
	if !filepath.IsAbs(state) {
		state = ""
		if home := get("HOME"); filepath.IsAbs(home) {
			state = filepath.Join(home, ".local", "state")
		}
	}
	if state != "" {
		if d := filepath.Join(state, "sbx", "run"); len(d) <= privateBaseMax {
			return d
		}
	}
	tmp := get("TMPDIR")
	if tmp == "" {
		tmp = os.TempDir()
	}
	return filepath.Join(tmp, "sbx-"+strconv.Itoa(os.Getuid()))
}

// privateBaseMax is the longest runtime base RuntimeBase takes in the
// user's state directory: it leaves sandbox names of up to 24 bytes room
// in the longest socket path (see SandboxDir); a longer one falls back to
// the temporary directory, where names have more.
const privateBaseMax = maxSocketPath - len("/0123456789ab/") - 24 - len("/sbx-0123456789/control.sock")

// SandboxDir returns the supervisor directory of the sandbox name of the
// configuration in configDir, under base (see RuntimeBase):
// base/<12 hex digits of the hash of configDir's absolute path>/name. The
// hash keeps the path short whatever configDir is, since the unix socket
// paths inside it are limited to about 100 bytes; a path that would still
// be too long is an error.
//
// Of these directories, those that exist must be private ones of this
// user's: real directories (no symbolic links) owned by the user, which
// SandboxDir makes mode 0700 if they are not; and every directory above
// base must be owned by the user or root and, if others may write to it,
// sticky. Anything else is an *UnsafeError naming the path, so that
// nothing of the sandbox is read from or sent to a directory another user
// controls. It makes no directory (Spawn does).
func SandboxDir(base, configDir, name string) (string, error) {
	hashDir, err := configHashDir(base, configDir)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(hashDir, name)
	// The longest socket path Run makes is the machine's, inside its own
	// directory: dir/sbx-<10 digits>/control.sock.
	if n := len(dir) + len("/sbx-0123456789/") + len("control.sock"); n > maxSocketPath {
		return "", fmt.Errorf("supervisor: the runtime directory %s is too long for unix socket paths (%d bytes, at most %d); set SBX_RUNTIME_DIR to a shorter one", base, n, maxSocketPath)
	}
	if err := secureDir(dir, 3, false); err != nil {
		return "", err
	}
	return dir, nil
}

// configHashDir returns the directory under base that holds the
// supervisor directories of the configuration in configDir (see
// SandboxDir): base/<12 hex digits of the hash of its absolute path>.
func configHashDir(base, configDir string) (string, error) {
	abs, err := filepath.Abs(configDir)
	if err != nil {
		return "", fmt.Errorf("supervisor: %w", err)
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(base, hex.EncodeToString(sum[:6])), nil
}

// maxSocketPath is the longest unix socket path every host takes (macOS's
// sun_path is 104 bytes with its terminating NUL).
const maxSocketPath = 103
