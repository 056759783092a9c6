package netstream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// HeaderLen is the length of the prefix before each frame.
const HeaderLen = 4

// MaxFrame is the longest frame either side accepts: QEMU's own packet
// buffer (NET_BUFSIZE, 4096 + 65536 bytes), the most it takes from the
// socket. It is more than the guest can send: a virtio-net MTU of at
// most 65535 plus the Ethernet and VLAN headers.
const MaxFrame = 4096 + 65536

// ErrFrameTooLong is the error, wrapped, for a length prefix over
// MaxFrame: the stream is out of step or not QEMU's, and nothing after
// it can be trusted.
var ErrFrameTooLong = errors.New("frame longer than the longest QEMU sends")

// Reader reads frames from a stream. It is not safe for concurrent use.
type Reader struct {
	r     io.Reader
	hdr   [HeaderLen]byte
	buf   []byte
	count int64 // frames read, for error messages
}

// NewReader returns a Reader that reads frames from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: r}
}

// ReadFrame reads the next frame. The frame is valid only until the next
// call. At the end of the stream between two frames it returns io.EOF; a
// stream that ends inside a length prefix or a frame, or a prefix over
// MaxFrame, is an error that says which frame and how (wrapping
// io.ErrUnexpectedEOF or ErrFrameTooLong); any other read error is
// returned wrapped.
func (r *Reader) ReadFrame() ([]byte, error) {
	n, err := io.ReadFull(r.r, r.hdr[:])
	if err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("frame %d: the stream ended %d bytes into its %d-byte length prefix: %w",
				r.count+1, n, HeaderLen, err)
		}
		return nil, fmt.Errorf("frame %d: reading its length: %w", r.count+1, err)
	}
	size := binary.BigEndian.Uint32(r.hdr[:])
	if size > MaxFrame {
		return nil, fmt.Errorf("frame %d: length prefix %#08x (%d bytes): %w (%d bytes)",
			r.count+1, size, size, ErrFrameTooLong, MaxFrame)
	}
	if cap(r.buf) < int(size) {
		r.buf = make([]byte, size, max(int(size), 2048))
	}
	frame := r.buf[:size]
	if n, err := io.ReadFull(r.r, frame); err != nil {
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("frame %d: the stream ended after %d of its %d bytes: %w",
				r.count+1, n, size, io.ErrUnexpectedEOF)
		}
		return nil, fmt.Errorf("frame %d: reading its %d bytes: %w", r.count+1, size, err)
	}
	r.count++
	return frame, nil
}

// Writer writes frames to a stream. It is not safe for concurrent use.
type Writer struct {
	w   io.Writer
	hdr [HeaderLen]byte
}

// NewWriter returns a Writer that writes frames to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w}
}

// WriteFrame writes one frame with its length prefix, in one vectored
// write when w is a connection. A frame over MaxFrame is refused before
// anything is written.
func (w *Writer) WriteFrame(frame []byte) error {
	if len(frame) > MaxFrame {
		return fmt.Errorf("writing a %d-byte frame: %w (%d bytes)", len(frame), ErrFrameTooLong, MaxFrame)
	}
	binary.BigEndian.PutUint32(w.hdr[:], uint32(len(frame)))
	bufs := net.Buffers{w.hdr[:], frame}
	if _, err := bufs.WriteTo(w.w); err != nil {
		return fmt.Errorf("writing a %d-byte frame: %w", len(frame), err)
	}
	return nil
}
