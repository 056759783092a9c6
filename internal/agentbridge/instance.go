package agentbridge

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// InstanceName is the name of the supervisor directory of session's
// sandbox made from sandbox block name: "NAME-claude-" and 12 hex digits
// of the session id's SHA-256, short enough for unix socket paths. The
// whole id is in the lease's holder (Holder), which the caller checks.
func InstanceName(name, session string) string {
	sum := sha256.Sum256([]byte(session))
	return name + "-claude-" + hex.EncodeToString(sum[:6])
}

// holderPrefix starts the holder of a session sandbox's lease.
const holderPrefix = "claude session "

// Holder is the lease holder of session's sandbox.
func Holder(session string) string { return holderPrefix + session }

// HolderSession returns the session id of a lease holder Holder made,
// and whether it is one.
func HolderSession(holder string) (string, bool) {
	return strings.CutPrefix(holder, holderPrefix)
}
