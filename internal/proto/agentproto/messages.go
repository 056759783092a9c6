package agentproto

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
)

// Version is the protocol version this package describes.
const Version = 1

// Versions lists every protocol version this package can speak, oldest
// first.
var Versions = []int{Version}

// Capabilities a guest may announce in its Hello.
const (
	CapExec   = "exec"   // TypeExec with pipes
	CapPTY    = "pty"    // Exec.PTY and TypeResize
	CapSignal = "signal" // TypeSignal and TypeCancel
	CapUser   = "user"   // Exec.User
	CapFile   = "file"   // TypeFilePut and TypeFileGet
	// CapConfigure: TypeConfigure. A guest without it has no way to
	// reach the host's network, trust its CA or carry placeholders.
	CapConfigure = "configure"
	// CapIdentity: Configure.Identity. Only a guest with it can be
	// resumed from a saved machine as a sandbox of its own.
	CapIdentity = "identity"
)

// MaxPing is the largest ping payload.
const MaxPing = 64

// Channel is one byte stream within a session.
type Channel uint8

// Channels. Host-to-guest data (stdin, a file being put) travels on
// ChanStdin; guest-to-host data (stdout, a file being got) on ChanStdout,
// and standard error on ChanStderr.
const (
	ChanStdin  Channel = 0
	ChanStdout Channel = 1
	ChanStderr Channel = 2
)

func (c Channel) String() string {
	switch c {
	case ChanStdin:
		return "stdin"
	case ChanStdout:
		return "stdout"
	case ChanStderr:
		return "stderr"
	}
	return fmt.Sprintf("channel(%d)", uint8(c))
}

// Valid reports whether c is one of the three channels.
func (c Channel) Valid() bool { return c <= ChanStderr }

// ParseData splits a TypeData payload into its channel and data bytes. The
// data share the payload's memory.
func ParseData(p []byte) (Channel, []byte, error) {
	if len(p) < 1 || !Channel(p[0]).Valid() {
		return 0, nil, errors.New("agentproto: data frame without a valid channel")
	}
	return Channel(p[0]), p[1:], nil
}

// ParseEOF reads a TypeEOF payload.
func ParseEOF(p []byte) (Channel, error) {
	if len(p) != 1 || !Channel(p[0]).Valid() {
		return 0, errors.New("agentproto: eof frame without a valid channel")
	}
	return Channel(p[0]), nil
}

// ParseWindow reads a TypeWindow payload.
func ParseWindow(p []byte) (Channel, uint32, error) {
	if len(p) != 5 || !Channel(p[0]).Valid() {
		return 0, 0, errors.New("agentproto: malformed window frame")
	}
	return Channel(p[0]), binary.BigEndian.Uint32(p[1:]), nil
}

// ParseJSON decodes a control payload into v. Unknown fields are ignored,
// so later versions may add fields.
func ParseJSON(t Type, p []byte, v any) error {
	if err := json.Unmarshal(p, v); err != nil {
		return fmt.Errorf("agentproto: malformed %s frame: %w", t, err)
	}
	return nil
}

// Hello opens a connection. The host lists the versions it speaks in
// Versions; the guest answers with the one it chose in Version.
type Hello struct {
	Versions     []int    `json:"versions,omitempty"`
	Version      int      `json:"version,omitempty"`
	Software     string   `json:"software,omitempty"` // e.g. "sbx-guest v0.3.0"
	Capabilities []string `json:"capabilities,omitempty"`
}

// Has reports whether the hello announces a capability.
func (h Hello) Has(capability string) bool { return slices.Contains(h.Capabilities, capability) }

// Negotiate picks the highest version both ours and theirs list; ok is
// false when there is none.
func Negotiate(ours, theirs []int) (v int, ok bool) {
	for _, x := range theirs {
		if slices.Contains(ours, x) && x > v {
			v, ok = x, true
		}
	}
	return v, ok
}

// Exec asks the guest to run a process.
type Exec struct {
	// Args is the command line; Args[0] is looked up in the PATH of Env
	// when it holds no slash.
	Args []string `json:"args"`
	// Env holds "KEY=value" entries added to (and overriding) the
	// defaults: PATH, HOME, USER, LOGNAME, SHELL and, with a PTY, TERM.
	// The agent's own environment is not inherited.
	Env []string `json:"env,omitempty"`
	// Dir is the working directory; empty means the user's home
	// directory, or / when that does not exist.
	Dir string `json:"dir,omitempty"`
	// User runs the process as a user: a name or uid from the guest's
	// /etc/passwd, or "uid:gid". Empty means the agent's own user.
	User string `json:"user,omitempty"`
	// PTY, when set, gives the process a pseudo-terminal as its stdin,
	// stdout and stderr and makes it the controlling terminal.
	PTY *PTY `json:"pty,omitempty"`
	// Stdin says the host sends stdin on ChanStdin; otherwise the
	// process reads /dev/null (or, with a PTY, a terminal nobody types
	// into).
	Stdin bool `json:"stdin,omitempty"`
}

// PTY describes a pseudo-terminal.
type PTY struct {
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
	Term string `json:"term,omitempty"` // TERM; empty means DefaultTerm
}

// DefaultTerm is TERM for a PTY that names none.
const DefaultTerm = "xterm-256color"

// Started says the process runs.
type Started struct {
	Pid int `json:"pid"`
}

// Signal asks the guest to signal the process group of a session.
type Signal struct {
	// Signal is the signal's name, "SIGTERM" (names, not numbers, since
	// numbers differ between the host's and the guest's systems).
	Signal string `json:"signal"`
}

// Resize changes the size of a session's PTY.
type Resize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// Exit ends an exec session. Either the process exited with Code, or a
// signal killed it (Signal set, Code -1), or it could not be started or
// the session failed (Error set). A process that could not be started
// because its command was not found has Code 127, and one whose command
// was found but could not be executed 126, as shells report them; other
// failures have Code -1.
type Exit struct {
	Code       int    `json:"code"`
	Signal     string `json:"signal,omitempty"`
	CoreDumped bool   `json:"core_dumped,omitempty"`
	Error      *Error `json:"error,omitempty"`
}

// FilePut asks the guest to write a file with the content that follows.
// The file is written beside the destination and renamed over it, so a
// failed transfer leaves the destination as it was.
type FilePut struct {
	Path string `json:"path"` // absolute guest path
	Mode uint32 `json:"mode"` // permission bits, 0644 when zero
	// UID and GID own the file; nil keeps the agent's.
	UID *int `json:"uid,omitempty"`
	GID *int `json:"gid,omitempty"`
}

// FileGet asks the guest for a regular file's content.
type FileGet struct {
	Path string `json:"path"` // absolute guest path
}

// FileInfo describes the file a FileGet is about to send.
type FileInfo struct {
	Size int64  `json:"size"`
	Mode uint32 `json:"mode"` // permission bits
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
}

// Result ends a file session: success when Error is nil.
type Result struct {
	Error *Error `json:"error,omitempty"`
}

// Error is a failure reported by the guest.
type Error struct {
	// Code is the errno name for system errors ("ENOENT", "EACCES"),
	// or one of the codes below; empty when there is none.
	Code string `json:"code,omitempty"`
	// Message is the whole message, naming the path or input.
	Message string `json:"message"`
}

// Error codes that are not errno names.
const (
	CodeProtocol    = "protocol"     // a malformed or unexpected frame
	CodeBusy        = "busy"         // too many sessions
	CodeUnsupported = "unsupported"  // a request this guest cannot serve
	CodeNoUser      = "unknown-user" // Exec.User names no user
	CodeCanceled    = "canceled"     // the host canceled the session
)

func (e *Error) Error() string { return e.Message }

// Is lets errors.Is match the io/fs errors behind common errno codes.
func (e *Error) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.Code == "ENOENT"
	case fs.ErrExist:
		return e.Code == "EEXIST"
	case fs.ErrPermission:
		return e.Code == "EACCES" || e.Code == "EPERM"
	}
	return false
}
