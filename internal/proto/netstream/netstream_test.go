package netstream_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/socketpair"

	"github.com/sbx-dev/sbx/internal/proto/netstream"
)

// frame returns a frame of n bytes whose content depends on n and seed.
func frame(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	a, b := socketpair.New(t)
	sizes := []int{14, 60, 0, 1514, 9000, 65549, netstream.MaxFrame}
	done := make(chan error, 1)
	go func() {
		w := netstream.NewWriter(a)
		for i, n := range sizes {
			if err := w.WriteFrame(frame(n, byte(i))); err != nil {
				done <- err
				return
			}
		}
		done <- a.Close()
	}()
	r := netstream.NewReader(b)
	for i, n := range sizes {
		got, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d (%d bytes): %v", i, n, err)
		}
		if !bytes.Equal(got, frame(n, byte(i))) {
			t.Fatalf("frame %d: got %d bytes that differ from the %d written", i, len(got), n)
		}
	}
	if got, err := r.ReadFrame(); err != io.EOF {
		t.Errorf("after the last frame: %d bytes, %v; want io.EOF", len(got), err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The wire format is QEMU's, not merely what Writer and Reader agree on:
// a big-endian 4-byte length, then the frame.
func TestWireFormat(t *testing.T) {
	var buf bytes.Buffer
	w := netstream.NewWriter(&buf)
	if err := w.WriteFrame([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFrame(frame(300, 1)); err != nil {
		t.Fatal(err)
	}
	want := append([]byte{0, 0, 0, 3, 'a', 'b', 'c', 0, 0, 1, 0x2c}, frame(300, 1)...)
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("written % x…, want % x…", buf.Bytes()[:12], want[:12])
	}

	r := netstream.NewReader(bytes.NewReader([]byte{0, 0, 0, 2, 0x86, 0xdd, 0, 0, 0, 1, 0x42}))
	for _, want := range [][]byte{{0x86, 0xdd}, {0x42}} {
		got, err := r.ReadFrame()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read % x, %v; want % x", got, err, want)
		}
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Errorf("at the end: %v, want io.EOF", err)
	}
}

func TestBrokenStreams(t *testing.T) {
	be := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	good := append(be(3), "abc"...)
	for _, c := range []struct {
		name   string
		stream []byte
		is     error
		want   string
	}{
		{"truncated-prefix", append(good, 0, 0), io.ErrUnexpectedEOF,
			"frame 2: the stream ended 2 bytes into its 4-byte length prefix"},
		{"truncated-frame", append(append(good, be(1514)...), frame(100, 0)...), io.ErrUnexpectedEOF,
			"frame 2: the stream ended after 100 of its 1514 bytes"},
		{"missing-frame-body", append(good, be(60)...), io.ErrUnexpectedEOF,
			"frame 2: the stream ended after 0 of its 60 bytes"},
		{"oversized", append(append(good, be(netstream.MaxFrame+1)...), frame(100, 0)...), netstream.ErrFrameTooLong,
			"frame 2: length prefix 0x00011001 (69633 bytes): frame longer than the longest QEMU sends (69632 bytes)"},
		{"not-a-length", append(good, "GET / HTTP/1.1\r\n"...), netstream.ErrFrameTooLong,
			"frame 2: length prefix 0x47455420"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := socketpair.New(t)
			go func() {
				a.Write(c.stream)
				a.Close()
			}()
			r := netstream.NewReader(b)
			if got, err := r.ReadFrame(); err != nil || string(got) != "abc" {
				t.Fatalf("the good frame first: %q, %v", got, err)
			}
			got, err := r.ReadFrame()
			if err == nil {
				t.Fatalf("read a %d-byte frame from a broken stream", len(got))
			}
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q (is %v: %v), want it to say %q", err, c.is, errors.Is(err, c.is), c.want)
			}
		})
	}
}

// A read error other than the end of the stream is passed on.
func TestReadError(t *testing.T) {
	a, b := socketpair.New(t)
	a.Write([]byte{0, 0, 0, 10, 1, 2})
	b.Close()
	_, err := netstream.NewReader(b).ReadFrame()
	if !errors.Is(err, net.ErrClosed) || !strings.Contains(err.Error(), "frame 1: reading its length") {
		t.Errorf("reading a closed connection: %v", err)
	}
}

func TestWriteTooLong(t *testing.T) {
	var buf bytes.Buffer
	err := netstream.NewWriter(&buf).WriteFrame(make([]byte, netstream.MaxFrame+1))
	if !errors.Is(err, netstream.ErrFrameTooLong) || !strings.Contains(err.Error(), "writing a 69633-byte frame") {
		t.Errorf("writing an oversized frame: %v", err)
	}
	if buf.Len() != 0 {
		t.Errorf("an oversized frame wrote %d bytes", buf.Len())
	}
}
