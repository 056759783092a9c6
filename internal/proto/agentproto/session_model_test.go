package agentproto

import (
	"encoding/json"
	"testing"
)

// sessionModel is the grammar of Session's doc comment written out
// again, plainly, so that a frame Session lets through and the rules
// refuse (or the other way round) shows: the host's client, the router
// and the guest's server all trust Session to say the same.
type sessionModel struct {
	kind       Type
	stdin, pty bool

	hostEOF              bool
	started, info, ended bool
	stdoutEOF, stderrEOF bool
}

func (m *sessionModel) guestSends(p []byte) (Channel, bool) {
	if len(p) < 1 {
		return 0, false
	}
	switch ch := Channel(p[0]); {
	case ch == ChanStdout && (m.kind == TypeExec || m.kind == TypeFileGet):
		return ch, true
	case ch == ChanStderr && m.kind == TypeExec && !m.pty:
		return ch, true
	}
	return 0, false
}

func (m *sessionModel) eof(ch Channel) *bool {
	if ch == ChanStdout {
		return &m.stdoutEOF
	}
	return &m.stderrEOF
}

func (m *sessionModel) host(t Type, p []byte) bool {
	takesStdin := func() bool { return len(p) >= 1 && Channel(p[0]) == ChanStdin && m.stdin && !m.hostEOF }
	switch t {
	case TypeData:
		return takesStdin()
	case TypeEOF:
		if len(p) != 1 || !takesStdin() {
			return false
		}
		m.hostEOF = true
		return true
	case TypeWindow:
		_, ok := m.guestSends(p)
		return len(p) == 5 && ok
	case TypeSignal:
		return m.kind == TypeExec && json.Unmarshal(p, &Signal{}) == nil
	case TypeResize:
		return m.kind == TypeExec && json.Unmarshal(p, &Resize{}) == nil
	case TypeCancel:
		return true
	}
	return false
}

func (m *sessionModel) guest(t Type, p []byte) bool {
	if m.ended {
		return false
	}
	switch t {
	case TypeData, TypeEOF:
		ch, ok := m.guestSends(p)
		if !ok || *m.eof(ch) || t == TypeEOF && len(p) != 1 {
			return false
		}
		if t == TypeEOF {
			*m.eof(ch) = true
		}
		return true
	case TypeWindow:
		return len(p) == 5 && Channel(p[0]) == ChanStdin && m.stdin
	case TypeStarted:
		if m.kind != TypeExec || m.started {
			return false
		}
		m.started = true
		return true
	case TypeFileInfo:
		if m.kind != TypeFileGet || m.info {
			return false
		}
		m.info = true
		return true
	case TypeExit:
		m.ended = m.kind == TypeExec
		return m.ended
	case TypeResult:
		m.ended = m.kind != TypeExec
		return m.ended
	}
	return false
}

// FuzzSessionModel runs Session and sessionModel side by side over
// frames from both ends in any order, payloads included: they must
// accept and refuse the same frames.
func FuzzSessionModel(f *testing.F) {
	f.Add(byte(TypeExec), byte(1), []byte{1, 0x20, 2, 0, 'x', 0, 0x11, 0, 1, 0x21, 1, 0, 0, 0x20, 2, 0, 'y', 0, 0x15, 0})
	f.Add(byte(TypeFileGet), byte(0), []byte{0, 0x32, 0, 0, 0x20, 2, 1, 'x', 1, 0x22, 5, 1, 0, 0, 0, 1, 0, 0x33, 0})
	f.Add(byte(TypeFilePut), byte(0), []byte{1, 0x20, 2, 0, 'x', 1, 0x21, 1, 0, 1, 0x21, 1, 0, 0, 0x22, 5, 0, 0, 0, 0, 1})
	f.Add(byte(TypeExec), byte(2), []byte{1, 0x13, 2, '{', '}', 1, 0x14, 4, 'n', 'u', 'l', 'l', 0, 0x20, 1, 2})
	f.Fuzz(func(t *testing.T, kind, flags byte, script []byte) {
		exec := &Exec{Stdin: flags&1 != 0}
		if flags&2 != 0 {
			exec.PTY = &PTY{}
		}
		s, err := NewSession(Type(kind), exec)
		if err != nil {
			return
		}
		m := &sessionModel{kind: Type(kind), stdin: s.Stdin(), pty: s.PTY()}
		if want := Type(kind) == TypeFilePut || Type(kind) == TypeExec && exec.Stdin; m.stdin != want {
			t.Fatalf("%s session: Stdin %v", Type(kind), m.stdin)
		}
		// who (bit 0: the host), type, payload length, payload.
		for len(script) >= 3 {
			host, typ, n := script[0]&1 != 0, Type(script[1]), min(int(script[2]), len(script)-3)
			p := script[3 : 3+n]
			script = script[3+n:]
			fr := Frame{Type: typ, Stream: 3, Payload: p}
			var got, want bool
			if host {
				got, want = s.Host(fr) == nil, m.host(typ, p)
			} else {
				end, err := s.Guest(fr)
				got, want = err == nil, m.guest(typ, p)
				if got && end != m.ended {
					t.Fatalf("guest %s %x: end %v, the rules say %v", typ, p, end, m.ended)
				}
			}
			if got != want {
				t.Fatalf("%s session, %s from the host %v, payload %x: Session accepts %v, the rules %v", Type(kind), typ, host, p, got, want)
			}
		}
	})
}
