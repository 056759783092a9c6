package agentproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"net"
	"sync"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	w, r := NewConn(a), NewConn(b)
	big := bytes.Repeat([]byte{0xab}, MaxData)
	go func() {
		w.WriteJSON(TypeExec, 7, &Exec{Args: []string{"sh", "-c", "exit 3"}, PTY: &PTY{Rows: 24, Cols: 80}})
		w.WriteData(7, ChanStdout, big)
		w.WriteWindow(7, ChanStdin, 12345)
		w.WriteEOF(7, ChanStdin)
		w.WriteFrame(TypeCancel, 7)
	}()

	f, err := r.ReadFrame()
	if err != nil || f.Type != TypeExec || f.Stream != 7 {
		t.Fatalf("frame 1: %v %+v", err, f)
	}
	var e Exec
	if err := ParseJSON(f.Type, f.Payload, &e); err != nil {
		t.Fatal(err)
	}
	if len(e.Args) != 3 || e.Args[2] != "exit 3" || e.PTY == nil || e.PTY.Cols != 80 {
		t.Errorf("exec = %+v", e)
	}

	f, err = r.ReadFrame()
	if err != nil || f.Type != TypeData {
		t.Fatalf("frame 2: %v %v", err, f.Type)
	}
	ch, data, err := ParseData(f.Payload)
	if err != nil || ch != ChanStdout || !bytes.Equal(data, big) {
		t.Errorf("data: %v %v %d bytes", err, ch, len(data))
	}

	f, _ = r.ReadFrame()
	ch, n, err := ParseWindow(f.Payload)
	if err != nil || f.Type != TypeWindow || ch != ChanStdin || n != 12345 {
		t.Errorf("window: %v %v %v %d", f.Type, err, ch, n)
	}
	f, _ = r.ReadFrame()
	if ch, err := ParseEOF(f.Payload); err != nil || f.Type != TypeEOF || ch != ChanStdin {
		t.Errorf("eof: %v %v %v", f.Type, ch, err)
	}
	f, _ = r.ReadFrame()
	if f.Type != TypeCancel || len(f.Payload) != 0 {
		t.Errorf("cancel: %+v", f)
	}
}

func TestFrameEncoding(t *testing.T) {
	// The header layout is the contract; pin it.
	b, err := AppendFrame(nil, TypeData, 0x01020304, []byte{1}, []byte("hi"))
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0, 0, 0, 3, 0x20, 1, 2, 3, 4, 1, 'h', 'i'}
	if !bytes.Equal(b, want) {
		t.Errorf("encoding = %x, want %x", b, want)
	}
}

func TestReadFrameLimits(t *testing.T) {
	// A length over the maximum is refused from the header alone.
	var h [HeaderSize]byte
	binary.BigEndian.PutUint32(h[:], MaxPayload+1)
	if _, err := ReadFrame(bytes.NewReader(h[:])); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("oversized frame: %v", err)
	}
	if _, err := AppendFrame(nil, TypeData, 1, make([]byte, MaxPayload+1)); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("oversized write: %v", err)
	}
	// Truncation inside a frame is not a clean end.
	binary.BigEndian.PutUint32(h[:], 10)
	if _, err := ReadFrame(bytes.NewReader(append(h[:], 1, 2))); err != io.ErrUnexpectedEOF {
		t.Errorf("truncated payload: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(h[:4])); err != io.ErrUnexpectedEOF {
		t.Errorf("truncated header: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(nil)); err != io.EOF {
		t.Errorf("empty stream: %v", err)
	}
}

func TestParseRejectsMalformed(t *testing.T) {
	if _, _, err := ParseData(nil); err == nil {
		t.Error("data without a channel accepted")
	}
	if _, _, err := ParseData([]byte{3, 'x'}); err == nil {
		t.Error("data on channel 3 accepted")
	}
	if _, _, err := ParseWindow([]byte{1, 0, 0}); err == nil {
		t.Error("short window accepted")
	}
	if _, err := ParseEOF([]byte{1, 1}); err == nil {
		t.Error("long eof accepted")
	}
	if err := ParseJSON(TypeExec, []byte("{"), &Exec{}); err == nil {
		t.Error("bad JSON accepted")
	}
}

func TestConcurrentWritesDoNotInterleave(t *testing.T) {
	var buf lockedBuffer
	c := NewConn(&buf)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			p := bytes.Repeat([]byte{byte(i)}, 1000+i)
			for range 50 {
				c.WriteData(uint32(i+1), ChanStdout, p)
			}
		})
	}
	wg.Wait()
	r := bytes.NewReader(buf.b.Bytes())
	count := 0
	for {
		f, err := ReadFrame(r)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		_, data, _ := ParseData(f.Payload)
		i := int(f.Stream - 1)
		if len(data) != 1000+i || !bytes.Equal(data, bytes.Repeat([]byte{byte(i)}, len(data))) {
			t.Fatalf("frame %d of stream %d is mixed", count, f.Stream)
		}
		count++
	}
	if count != 16*50 {
		t.Errorf("%d frames, want %d", count, 16*50)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) Read(p []byte) (int, error) { return 0, io.EOF }
func (l *lockedBuffer) Close() error               { return nil }

func TestNegotiate(t *testing.T) {
	for _, c := range []struct {
		ours, theirs []int
		want         int
		ok           bool
	}{
		{[]int{1}, []int{1}, 1, true},
		{[]int{1, 2}, []int{1, 2, 3}, 2, true},
		{[]int{1}, []int{2}, 0, false},
		{[]int{1}, nil, 0, false},
	} {
		v, ok := Negotiate(c.ours, c.theirs)
		if v != c.want || ok != c.ok {
			t.Errorf("Negotiate(%v, %v) = %d, %v; want %d, %v", c.ours, c.theirs, v, ok, c.want, c.ok)
		}
	}
}

func TestErrorIs(t *testing.T) {
	var err error = &Error{Code: "ENOENT", Message: "get /x: no such file or directory"}
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		t.Error("ENOENT does not match fs.ErrNotExist alone")
	}
	if !errors.Is(&Error{Code: "EACCES"}, fs.ErrPermission) {
		t.Error("EACCES does not match fs.ErrPermission")
	}
}

// FuzzReadFrame checks that no input makes the decoder panic or allocate
// beyond the maximum payload, and that what it decodes encodes back to
// the same bytes.
func FuzzReadFrame(f *testing.F) {
	seed, _ := AppendFrame(nil, TypeExec, 1, []byte(`{"args":["true"]}`))
	f.Add(seed)
	seed, _ = AppendFrame(nil, TypeData, 2, []byte{1, 'x'})
	f.Add(seed)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x20, 0, 0, 0, 1})
	f.Add([]byte{0, 0, 0, 5, 0x22, 0, 0, 0, 1, 1, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		var out []byte
		for {
			fr, err := ReadFrame(r)
			if err != nil {
				break
			}
			if len(fr.Payload) > MaxPayload {
				t.Fatalf("payload of %d bytes", len(fr.Payload))
			}
			// The typed parsers must not panic either.
			switch fr.Type {
			case TypeData:
				ParseData(fr.Payload)
			case TypeWindow:
				ParseWindow(fr.Payload)
			case TypeEOF:
				ParseEOF(fr.Payload)
			case TypeExec:
				ParseJSON(fr.Type, fr.Payload, &Exec{})
			}
			out, err = AppendFrame(out, fr.Type, fr.Stream, fr.Payload)
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.HasPrefix(in, out) {
			t.Fatalf("re-encoding differs from the input")
		}
	})
}

func BenchmarkReadFrame(b *testing.B) {
	frame, _ := AppendFrame(nil, TypeData, 1, []byte{1}, make([]byte, MaxData))
	b.SetBytes(int64(len(frame)))
	r := bytes.NewReader(nil)
	for b.Loop() {
		r.Reset(frame)
		if _, err := ReadFrame(r); err != nil {
			b.Fatal(err)
		}
	}
}
