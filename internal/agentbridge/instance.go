package agentbridge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sbx-dev/sbx/internal/atomicfile"
)

// InstanceName is the name of the supervisor directory of session's
// sandbox made from sandbox block name: "NAME-claude-" and 12 hex digits
// of the session id's SHA-256, short enough for unix socket paths. The
// whole id is in the directory's SessionFile, which ReadSession checks.
func InstanceName(name, session string) string {
	sum := sha256.Sum256([]byte(session))
	return name + "-claude-" + hex.EncodeToString(sum[:6])
}

// SessionFile is the file in a session sandbox's supervisor directory
// that says whose it is.
const SessionFile = "claude-session.json"

// Session is what SessionFile holds.
type Session struct {
	// ID is Claude Code's session_id.
	ID string `json:"session_id"`
	// Sandbox is the sandbox block the instance was made from.
	Sandbox string `json:"sandbox"`
}

// WriteSession records s in dir.
func WriteSession(dir string, s Session) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(dir, SessionFile), append(b, '\n'), 0o600)
}

// ReadSession reads dir's SessionFile; a directory without one is an
// error wrapping os.ErrNotExist.
func ReadSession(dir string) (Session, error) {
	var s Session
	b, err := os.ReadFile(filepath.Join(dir, SessionFile))
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", filepath.Join(dir, SessionFile), err)
	}
	return s, nil
}

// ErrOtherSession is returned by CheckSession for a directory that
// belongs to another session (two ids whose hashes share 48 bits).
var ErrOtherSession = errors.New("the sandbox directory belongs to another Claude session")

// CheckSession returns nil when dir is session's or has no SessionFile
// yet, ErrOtherSession when it is another's.
func CheckSession(dir, session string) error {
	s, err := ReadSession(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.ID != session {
		return ErrOtherSession
	}
	return nil
}
