package agentproto

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// step is one frame of a session: from the host (host true) or the
// guest, and the refusal expected (a substring of the error), or ""
// when the frame is in order.
type step struct {
	host   bool
	t      Type
	p      []byte
	refuse string
	end    bool
}

func fromHost(t Type, p []byte, refuse string) step {
	return step{host: true, t: t, p: p, refuse: refuse}
}
func fromGuest(t Type, p []byte, refuse string) step { return step{t: t, p: p, refuse: refuse} }

func data(ch Channel, s string) []byte { return append([]byte{byte(ch)}, s...) }
func eof(ch Channel) []byte            { return []byte{byte(ch)} }
func window(ch Channel) []byte         { return []byte{byte(ch), 0, 0, 0, 1} }
func js(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestSessionTransitions(t *testing.T) {
	exec := &Exec{Args: []string{"x"}}
	execIn := &Exec{Args: []string{"x"}, Stdin: true}
	execPTY := &Exec{Args: []string{"x"}, Stdin: true, PTY: &PTY{}}
	end := func(s step) step { s.end = true; return s }
	for _, tc := range []struct {
		name  string
		kind  Type
		exec  *Exec
		steps []step
	}{
		{"exec in order", TypeExec, execIn, []step{
			fromGuest(TypeStarted, js(Started{Pid: 1}), ""),
			fromHost(TypeData, data(ChanStdin, "in"), ""),
			fromHost(TypeSignal, js(Signal{Signal: "SIGINT"}), ""),
			fromHost(TypeResize, js(Resize{Rows: 1, Cols: 1}), ""),
			fromHost(TypeWindow, window(ChanStdout), ""),
			fromHost(TypeWindow, window(ChanStderr), ""),
			fromHost(TypeEOF, eof(ChanStdin), ""),
			fromHost(TypeCancel, nil, ""),
			fromHost(TypeCancel, nil, ""),
			fromGuest(TypeWindow, window(ChanStdin), ""),
			fromGuest(TypeData, data(ChanStdout, "out"), ""),
			fromGuest(TypeData, data(ChanStderr, "err"), ""),
			fromGuest(TypeEOF, eof(ChanStdout), ""),
			fromGuest(TypeEOF, eof(ChanStderr), ""),
			end(fromGuest(TypeExit, js(Exit{}), "")),
			fromGuest(TypeData, data(ChanStdout, "late"), "after the session's end"),
		}},
		{"exec started twice", TypeExec, exec, []step{
			fromGuest(TypeStarted, js(Started{}), ""),
			fromGuest(TypeStarted, js(Started{}), "a second started"),
		}},
		{"exec without stdin", TypeExec, exec, []step{
			fromHost(TypeData, data(ChanStdin, "x"), "takes none"),
			fromHost(TypeEOF, eof(ChanStdin), "takes no data"),
			fromGuest(TypeWindow, window(ChanStdin), "where the host sends nothing"),
		}},
		{"stdin after its eof", TypeExec, execIn, []step{
			fromHost(TypeEOF, eof(ChanStdin), ""),
			fromHost(TypeData, data(ChanStdin, "x"), "after its eof"),
			fromHost(TypeEOF, eof(ChanStdin), "a second eof"),
		}},
		{"host data on stdout", TypeExec, execIn, []step{
			fromHost(TypeData, data(ChanStdout, "x"), "takes none"),
			fromHost(TypeData, []byte{9, 'x'}, "valid channel"),
			fromHost(TypeEOF, eof(ChanStderr), "eof on stderr"),
		}},
		{"pty has no stderr", TypeExec, execPTY, []step{
			fromGuest(TypeData, data(ChanStderr, "x"), "does not have"),
			fromGuest(TypeEOF, eof(ChanStderr), "does not have"),
			fromHost(TypeWindow, window(ChanStderr), "sends nothing"),
			fromGuest(TypeData, data(ChanStdout, "x"), ""),
		}},
		{"guest output after its eof", TypeExec, exec, []step{
			fromGuest(TypeEOF, eof(ChanStdout), ""),
			fromGuest(TypeData, data(ChanStdout, "x"), "after its eof"),
			fromGuest(TypeEOF, eof(ChanStdout), "has ended"),
			fromGuest(TypeData, data(ChanStderr, "x"), ""),
		}},
		{"exec ends with exit only", TypeExec, exec, []step{
			fromGuest(TypeResult, js(Result{}), "result frame on an exec"),
			fromGuest(TypeFileInfo, js(FileInfo{}), "file-info frame on an exec"),
			fromGuest(TypeExec, js(exec), "from the guest side"),
			fromGuest(TypePing, nil, "from the guest side"),
			fromHost(TypeStarted, js(Started{}), "from the host side"),
			fromHost(TypeSignal, []byte("{"), "malformed signal"),
			end(fromGuest(TypeExit, js(Exit{}), "")),
			fromGuest(TypeExit, js(Exit{}), "after the session's end"),
		}},
		{"file put", TypeFilePut, nil, []step{
			fromHost(TypeData, data(ChanStdin, "content"), ""),
			fromHost(TypeSignal, js(Signal{Signal: "KILL"}), "signal frame on a file-put"),
			fromHost(TypeResize, js(Resize{}), "resize frame on a file-put"),
			fromHost(TypeWindow, window(ChanStdout), "sends nothing"),
			fromGuest(TypeWindow, window(ChanStdin), ""),
			fromGuest(TypeData, data(ChanStdout, "x"), "does not have"),
			fromGuest(TypeStarted, js(Started{}), "started frame on a file-put"),
			fromGuest(TypeExit, js(Exit{}), "exit frame on a file-put"),
			fromHost(TypeEOF, eof(ChanStdin), ""),
			end(fromGuest(TypeResult, js(Result{}), "")),
		}},
		{"file get", TypeFileGet, nil, []step{
			fromHost(TypeData, data(ChanStdin, "x"), "takes none"),
			fromGuest(TypeFileInfo, js(FileInfo{Size: 1}), ""),
			fromGuest(TypeFileInfo, js(FileInfo{Size: 1}), "a second file-info"),
			fromHost(TypeWindow, window(ChanStdout), ""),
			fromHost(TypeWindow, window(ChanStderr), "sends nothing"),
			fromGuest(TypeData, data(ChanStdout, "x"), ""),
			fromGuest(TypeData, data(ChanStderr, "x"), "does not have"),
			fromGuest(TypeWindow, window(ChanStdin), "host sends nothing"),
			fromGuest(TypeEOF, eof(ChanStdout), ""),
			fromHost(TypeCancel, nil, ""),
			end(fromGuest(TypeResult, js(Result{}), "")),
		}},
		{"configure", TypeConfigure, nil, []step{
			fromHost(TypeData, data(ChanStdin, "x"), "takes none"),
			fromHost(TypeWindow, window(ChanStdout), "sends nothing"),
			fromGuest(TypeData, data(ChanStdout, "x"), "does not have"),
			fromGuest(TypeFileInfo, js(FileInfo{}), "file-info frame on a configure"),
			fromHost(TypeCancel, nil, ""),
			end(fromGuest(TypeResult, js(Result{}), "")),
			fromGuest(TypeResult, js(Result{}), "after the session's end"),
		}},
		{"unknown types", TypeExec, exec, []step{
			fromHost(Type(0x7e), nil, "from the host side"),
			fromGuest(Type(0x7e), nil, "from the guest side"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSession(tc.kind, tc.exec)
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tc.steps {
				f := Frame{Type: st.t, Stream: 5, Payload: st.p}
				var (
					end bool
					err error
				)
				who := "guest"
				if st.host {
					who = "host"
					err = s.Host(f)
				} else {
					end, err = s.Guest(f)
				}
				switch {
				case st.refuse == "" && err != nil:
					t.Fatalf("step %d: %s %s refused: %v", i, who, st.t, err)
				case st.refuse != "" && err == nil:
					t.Fatalf("step %d: %s %s accepted; want a refusal about %q", i, who, st.t, st.refuse)
				case st.refuse != "" && !strings.Contains(err.Error(), st.refuse):
					t.Fatalf("step %d: %s %s refused with %q; want one about %q", i, who, st.t, err, st.refuse)
				}
				if err != nil {
					var se *SessionError
					if !errors.As(err, &se) || se.Stream != 5 || !strings.HasPrefix(err.Error(), "stream 5: ") {
						t.Fatalf("step %d: error %v (%T) is not a SessionError naming the stream", i, err, err)
					}
				}
				if end != st.end {
					t.Fatalf("step %d: %s %s: end = %v, want %v", i, who, st.t, end, st.end)
				}
			}
		})
	}
}

func TestOpenSession(t *testing.T) {
	s, err := OpenSession(Frame{Type: TypeExec, Stream: 3, Payload: js(Exec{Args: []string{"x"}, Stdin: true, PTY: &PTY{}})})
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind() != TypeExec || !s.Stdin() || !s.PTY() || s.Sends(ChanStderr) || !s.Sends(ChanStdout) {
		t.Errorf("exec session: kind %s stdin %v pty %v", s.Kind(), s.Stdin(), s.PTY())
	}
	if s, err := OpenSession(Frame{Type: TypeFilePut, Stream: 3, Payload: js(FilePut{Path: "/x"})}); err != nil || !s.Stdin() || s.Sends(ChanStdout) {
		t.Errorf("file put: %v, %+v", err, s)
	}
	for _, f := range []Frame{
		{Type: TypeExec, Stream: 3, Payload: []byte("{")},
		{Type: TypeFileGet, Stream: 3, Payload: []byte("[]")},
		{Type: TypeData, Stream: 3, Payload: data(ChanStdin, "x")},
	} {
		var se *SessionError
		if _, err := OpenSession(f); !errors.As(err, &se) || se.Stream != 3 {
			t.Errorf("OpenSession(%s %q) = %v; want a SessionError", f.Type, f.Payload, err)
		}
	}
	if _, err := NewSession(TypeExec, nil); err == nil {
		t.Error("NewSession(TypeExec, nil) succeeded")
	}
	if _, err := NewSession(TypeResult, nil); err == nil {
		t.Error("NewSession(TypeResult) succeeded")
	}
	for _, typ := range []Type{TypeExec, TypeFilePut, TypeFileGet, TypeConfigure} {
		if !Opens(typ) {
			t.Errorf("Opens(%s) = false", typ)
		}
	}
	if Opens(TypeData) || Opens(TypeExit) {
		t.Error("Opens is true for a frame inside a session")
	}
}

// FuzzSession feeds a session frames from both ends in any order: the
// grammar never panics, every refusal is a *SessionError, a frame it
// refuses changes nothing (the same frame is refused again), and once
// the guest has ended the session nothing more from the guest passes.
func FuzzSession(f *testing.F) {
	f.Add(byte(TypeExec), byte(3), []byte{1, 0x11, 0, 1, 0x20, 1, 'x', 0, 0x21, 0, 1, 0x15})
	f.Add(byte(TypeFileGet), byte(0), []byte{0, 0x32, 0, 0x20, 1, 'x', 0, 0x21, 1, 0, 0x33})
	f.Add(byte(TypeFilePut), byte(0), []byte{1, 0x20, 0, 'x', 1, 0x21, 0, 0, 0x22, 0, 0, 0, 0, 1})
	// A host cancel after the guest's exit: accepted, and the session
	// stays ended.
	f.Add(byte(TypeExec), byte(0), []byte{0, byte(TypeExit), 0, 1, byte(TypeCancel), 0})
	f.Fuzz(func(t *testing.T, kind, flags byte, script []byte) {
		exec := &Exec{Stdin: flags&1 != 0}
		if flags&2 != 0 {
			exec.PTY = &PTY{}
		}
		s, err := NewSession(Type(kind), exec)
		if err != nil {
			return
		}
		// The script is a list of frames: who (bit 0 of a byte: the
		// host), type, then a payload of up to 6 bytes, its length the
		// next byte's low bits.
		for len(script) >= 3 {
			host, typ, n := script[0]&1 != 0, Type(script[1]), int(script[2]%7)
			script = script[3:]
			n = min(n, len(script))
			fr := Frame{Type: typ, Stream: 9, Payload: script[:n]}
			script = script[n:]
			check := func() (bool, error) {
				if host {
					return false, s.Host(fr)
				}
				return s.Guest(fr)
			}
			ended := s.Ended()
			end, err := check()
			if err != nil {
				var se *SessionError
				if !errors.As(err, &se) || se.Stream != 9 {
					t.Fatalf("%s refused with %v (%T), not a SessionError", typ, err, err)
				}
				if _, again := check(); again == nil {
					t.Fatalf("%s refused once (%v), then accepted", typ, err)
				}
				continue
			}
			if host {
				// The host may still send (a cancel racing the
				// guest's exit); its frames never end the session.
				if s.Ended() != ended {
					t.Fatalf("host %s changed Ended to %v", typ, s.Ended())
				}
				continue
			}
			if ended {
				t.Fatalf("guest %s accepted after the session's end", typ)
			}
			if end != s.Ended() || end && typ != TypeExit && typ != TypeResult {
				t.Fatalf("guest %s: end %v, Ended %v", typ, end, s.Ended())
			}
		}
	})
}
