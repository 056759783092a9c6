package agentproto

import (
	"fmt"
)

// Session is the grammar of one session: which frames each end may send
// on its stream, on which channels, and in what order. The host's client
// checks the guest's frames with it, the guest's server checks the
// host's, and a router between them checks both, so a peer that breaks
// the order is refused with the same words wherever it is caught.
//
// The rules, by the request that opened the session (TypeExec,
// TypeFilePut, TypeFileGet or TypeConfigure):
//
// From the host (Host):
//   - TypeData and TypeEOF on ChanStdin only, and only in a session that
//     takes stdin (an exec with Exec.Stdin, a file put); no data after the
//     EOF, and one EOF;
//   - TypeWindow only on a channel the guest sends in the session;
//   - TypeSignal and TypeResize only in an exec, with a well-formed
//     payload;
//   - TypeCancel in any session, any number of times;
//   - nothing else (a request opening a session is the parties' to
//     check against the streams they know).
//
// From the guest (Guest):
//   - TypeData and TypeEOF only on a channel the session has (an exec:
//     stdout, and stderr unless it has a PTY; a file get: stdout); no
//     data after that channel's EOF, and one EOF per channel;
//   - TypeWindow only on ChanStdin of a session that takes stdin;
//   - TypeStarted once, in an exec; TypeFileInfo once, in a file get;
//   - TypeExit ends an exec, TypeResult any other session; after the
//     end, nothing.
//
// Credit is not Session's business: Credit and Inbox count it at the
// ends, and a router counts what passes through it. A Session is not
// safe for concurrent use; each direction is checked by one reader.
type Session struct {
	kind  Type
	stdin bool
	pty   bool

	hostEOF bool // the host's EOF on ChanStdin

	started, info, ended bool
	eof                  [3]bool // the guest's EOF per channel
}

// SessionError is a frame that breaks a session's grammar.
type SessionError struct {
	Stream uint32
	Msg    string
}

func (e *SessionError) Error() string { return fmt.Sprintf("stream %d: %s", e.Stream, e.Msg) }

func orderf(f Frame, format string, args ...any) error {
	return &SessionError{Stream: f.Stream, Msg: fmt.Sprintf(format, args...)}
}

// Opens reports whether t is a request that opens a session.
func Opens(t Type) bool {
	switch t {
	case TypeExec, TypeFilePut, TypeFileGet, TypeConfigure:
		return true
	}
	return false
}

// NewSession returns the grammar of a session opened by a request of
// type kind; exec is the request of an exec session, and is not looked
// at otherwise.
func NewSession(kind Type, exec *Exec) (*Session, error) {
	s := &Session{kind: kind}
	switch kind {
	case TypeExec:
		if exec == nil {
			return nil, fmt.Errorf("agentproto: an exec session without its request")
		}
		s.stdin, s.pty = exec.Stdin, exec.PTY != nil
	case TypeFilePut:
		s.stdin = true
	case TypeFileGet, TypeConfigure:
	default:
		return nil, fmt.Errorf("agentproto: %s does not open a session", kind)
	}
	return s, nil
}

// OpenSession decodes the request frame f and returns the grammar of the
// session it opens. A payload that does not decode as its request is a
// *SessionError.
func OpenSession(f Frame) (*Session, error) {
	var err error
	var exec Exec
	switch f.Type {
	case TypeExec:
		err = ParseJSON(f.Type, f.Payload, &exec)
	case TypeFilePut:
		err = ParseJSON(f.Type, f.Payload, &FilePut{})
	case TypeFileGet:
		err = ParseJSON(f.Type, f.Payload, &FileGet{})
	case TypeConfigure:
		err = ParseJSON(f.Type, f.Payload, &Configure{})
	default:
		return nil, orderf(f, "%s frame does not open a session", f.Type)
	}
	if err != nil {
		return nil, orderf(f, "%v", err)
	}
	return NewSession(f.Type, &exec)
}

// Kind is the request that opened the session.
func (s *Session) Kind() Type { return s.kind }

// Stdin reports whether the host sends data on ChanStdin.
func (s *Session) Stdin() bool { return s.stdin }

// PTY reports whether the session is an exec on a terminal.
func (s *Session) PTY() bool { return s.pty }

// Ended reports whether the guest has ended the session.
func (s *Session) Ended() bool { return s.ended }

// Sends reports whether the guest sends data on ch in the session.
func (s *Session) Sends(ch Channel) bool {
	switch s.kind {
	case TypeExec:
		return ch == ChanStdout || ch == ChanStderr && !s.pty
	case TypeFileGet:
		return ch == ChanStdout
	}
	return false
}

// Host checks a frame the host sends on the session's stream and
// records it; an error is a *SessionError.
func (s *Session) Host(f Frame) error {
	switch f.Type {
	case TypeData:
		ch, _, err := ParseData(f.Payload)
		if err != nil {
			return orderf(f, "%v", err)
		}
		if ch != ChanStdin || !s.stdin {
			return orderf(f, "data on %s, where the session takes none", ch)
		}
		if s.hostEOF {
			return orderf(f, "data on %s after its eof", ch)
		}
	case TypeEOF:
		ch, err := ParseEOF(f.Payload)
		if err != nil {
			return orderf(f, "%v", err)
		}
		if ch != ChanStdin || !s.stdin {
			return orderf(f, "eof on %s, where the session takes no data", ch)
		}
		if s.hostEOF {
			return orderf(f, "a second eof on %s", ch)
		}
		s.hostEOF = true
	case TypeWindow:
		ch, _, err := ParseWindow(f.Payload)
		if err != nil {
			return orderf(f, "%v", err)
		}
		if !s.Sends(ch) {
			return orderf(f, "window on %s, where the session sends nothing", ch)
		}
	case TypeSignal, TypeResize:
		if s.kind != TypeExec {
			return orderf(f, "%s frame on %s session", f.Type, article(s.kind))
		}
		var err error
		if f.Type == TypeSignal {
			err = ParseJSON(f.Type, f.Payload, &Signal{})
		} else {
			err = ParseJSON(f.Type, f.Payload, &Resize{})
		}
		if err != nil {
			return orderf(f, "%v", err)
		}
	case TypeCancel:
	default:
		return orderf(f, "%s frame from the host side", f.Type)
	}
	return nil
}

// Guest checks a frame the guest sends on the session's stream and
// records it; end says the frame ends the session. An error is a
// *SessionError. Control payloads (Started, Exit, FileInfo, Result) are
// decoded by whoever reads them, not here.
func (s *Session) Guest(f Frame) (end bool, err error) {
	if s.ended {
		return false, orderf(f, "%s frame after the session's end", f.Type)
	}
	switch f.Type {
	case TypeData:
		ch, _, err := ParseData(f.Payload)
		if err != nil {
			return false, orderf(f, "%v", err)
		}
		if !s.Sends(ch) {
			return false, orderf(f, "data on %s, which the %s session does not have", ch, s.kind)
		}
		if s.eof[ch] {
			return false, orderf(f, "data on %s after its eof", ch)
		}
	case TypeEOF:
		ch, err := ParseEOF(f.Payload)
		if err != nil {
			return false, orderf(f, "%v", err)
		}
		if !s.Sends(ch) || s.eof[ch] {
			return false, orderf(f, "eof on %s, which the %s session does not have or has ended", ch, s.kind)
		}
		s.eof[ch] = true
	case TypeWindow:
		ch, _, err := ParseWindow(f.Payload)
		if err != nil {
			return false, orderf(f, "%v", err)
		}
		if ch != ChanStdin || !s.stdin {
			return false, orderf(f, "window on %s, where the host sends nothing", ch)
		}
	case TypeStarted:
		if s.kind != TypeExec {
			return false, orderf(f, "started frame on %s session", article(s.kind))
		}
		if s.started {
			return false, orderf(f, "a second started frame")
		}
		s.started = true
	case TypeFileInfo:
		if s.kind != TypeFileGet {
			return false, orderf(f, "file-info frame on %s session", article(s.kind))
		}
		if s.info {
			return false, orderf(f, "a second file-info frame")
		}
		s.info = true
	case TypeExit:
		if s.kind != TypeExec {
			return false, orderf(f, "exit frame on %s session", article(s.kind))
		}
		s.ended = true
	case TypeResult:
		if s.kind == TypeExec {
			return false, orderf(f, "result frame on an exec session")
		}
		s.ended = true
	default:
		return false, orderf(f, "%s frame from the guest side", f.Type)
	}
	return s.ended, nil
}

// article names a session kind with its article: "an exec", "a file-put".
func article(kind Type) string {
	if kind == TypeExec {
		return "an exec"
	}
	return "a " + kind.String()
}
