package agentproto

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// HeaderSize is the size of a frame header: length, type and stream id.
const HeaderSize = 9

// MaxPayload is the largest payload a frame may carry. A decoder refuses a
// larger length before allocating anything, so a corrupt or hostile stream
// costs at most this much memory per frame.
const MaxPayload = 1 << 20

// MaxData is the largest number of data bytes a sender puts in one
// TypeData frame. Smaller chunks interleave sessions more finely.
const MaxData = 64 << 10

// Type says what a frame holds.
type Type uint8

// Frame types. Those on stream 0 concern the connection; the others
// concern the session their stream id names.
const (
	TypeHello Type = 0x01 // Hello, both ways, stream 0
	TypePing  Type = 0x02 // opaque payload of at most 64 bytes, host to guest
	TypePong  Type = 0x03 // the ping's payload, guest to host
	TypeError Type = 0x04 // Error, guest to host, stream 0: the guest closes the connection

	TypeExec    Type = 0x10 // Exec, host to guest, opens a session
	TypeStarted Type = 0x11 // Started, guest to host
	TypeSignal  Type = 0x12 // Signal, host to guest
	TypeResize  Type = 0x13 // Resize, host to guest
	TypeCancel  Type = 0x14 // empty, host to guest: kill the process group, abort a transfer
	TypeExit    Type = 0x15 // Exit, guest to host, ends an exec session

	TypeData   Type = 0x20 // Channel byte + data bytes
	TypeEOF    Type = 0x21 // Channel byte: no more data on that channel
	TypeWindow Type = 0x22 // Channel byte + uint32 credit increment

	TypeFilePut  Type = 0x30 // FilePut, host to guest, opens a session
	TypeFileGet  Type = 0x31 // FileGet, host to guest, opens a session
	TypeFileInfo Type = 0x32 // FileInfo, guest to host
	TypeResult   Type = 0x33 // Result, guest to host, ends a file session or a configure session

	TypeConfigure Type = 0x40 // Configure, host to guest, opens a session the guest ends with TypeResult
)

var typeNames = map[Type]string{
	TypeHello: "hello", TypePing: "ping", TypePong: "pong", TypeError: "error",
	TypeExec: "exec", TypeStarted: "started", TypeSignal: "signal", TypeResize: "resize",
	TypeCancel: "cancel", TypeExit: "exit",
	TypeData: "data", TypeEOF: "eof", TypeWindow: "window",
	TypeFilePut: "file-put", TypeFileGet: "file-get", TypeFileInfo: "file-info", TypeResult: "result",
	TypeConfigure: "configure",
}

func (t Type) String() string {
	if s, ok := typeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("type(0x%02x)", uint8(t))
}

// Known reports whether t is a frame type of this protocol version.
func (t Type) Known() bool {
	_, ok := typeNames[t]
	return ok
}

// Frame is one decoded frame.
type Frame struct {
	Type    Type
	Stream  uint32
	Payload []byte
}

// ErrFrameTooLarge is returned for a frame whose length exceeds MaxPayload.
var ErrFrameTooLarge = errors.New("agentproto: frame larger than the maximum payload")

// ReadFrame reads one frame from r. The payload is freshly allocated, so
// the caller may keep it. A stream that ends between frames gives io.EOF;
// one that ends inside a frame gives io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader) (Frame, error) {
	var h [HeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(h[0:4])
	if n > MaxPayload {
		return Frame{}, fmt.Errorf("%w: %d bytes (maximum %d)", ErrFrameTooLarge, n, MaxPayload)
	}
	f := Frame{Type: Type(h[4]), Stream: binary.BigEndian.Uint32(h[5:9])}
	if n > 0 {
		f.Payload = make([]byte, n)
		if _, err := io.ReadFull(r, f.Payload); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, err
		}
	}
	return f, nil
}

// AppendFrame appends the encoding of a frame to b.
func AppendFrame(b []byte, t Type, stream uint32, payload ...[]byte) ([]byte, error) {
	n := 0
	for _, p := range payload {
		n += len(p)
	}
	if n > MaxPayload {
		return b, fmt.Errorf("%w: %s frame of %d bytes", ErrFrameTooLarge, t, n)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = append(b, byte(t))
	b = binary.BigEndian.AppendUint32(b, stream)
	for _, p := range payload {
		b = append(b, p...)
	}
	return b, nil
}

// Conn frames a byte stream. Reads are for one goroutine (the
// demultiplexing loop); writes may come from any number of goroutines, and
// each frame is written whole, in one Write, so frames never interleave.
type Conn struct {
	rwc io.ReadWriteCloser
	r   *bufio.Reader

	wmu  sync.Mutex
	wbuf []byte
	werr error
}

// NewConn frames rwc.
func NewConn(rwc io.ReadWriteCloser) *Conn {
	return &Conn{rwc: rwc, r: bufio.NewReaderSize(rwc, 64<<10)}
}

// ReadFrame reads the next frame.
func (c *Conn) ReadFrame() (Frame, error) { return ReadFrame(c.r) }

// Dispatch reads frames and hands each to dispatch until a read or
// dispatch fails, and returns that error; the peer closing the
// connection between frames is ErrPeerClosed.
func (c *Conn) Dispatch(dispatch func(Frame) error) error {
	for {
		f, err := c.ReadFrame()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return ErrPeerClosed
			}
			return err
		}
		if err := dispatch(f); err != nil {
			return err
		}
	}
}

// ErrPeerClosed is Dispatch's error when the other end closed the
// connection between two frames.
var ErrPeerClosed = errors.New("the other end closed the connection")

// WriteFrame writes one frame whose payload is the concatenation of
// payload. After a write fails, every later write fails with the same
// error: a partly written frame leaves the stream unusable.
func (c *Conn) WriteFrame(t Type, stream uint32, payload ...[]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	b, err := AppendFrame(c.wbuf[:0], t, stream, payload...)
	if err != nil {
		return err
	}
	if cap(b) <= 2*(MaxData+HeaderSize+1) {
		c.wbuf = b
	}
	if _, err := c.rwc.Write(b); err != nil {
		c.werr = fmt.Errorf("agentproto: writing %s frame: %w", t, err)
		return c.werr
	}
	return nil
}

// WriteJSON writes a frame whose payload is the JSON encoding of v.
func (c *Conn) WriteJSON(t Type, stream uint32, v any) error {
	p, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("agentproto: encoding %s: %w", t, err)
	}
	return c.WriteFrame(t, stream, p)
}

// WriteData writes data bytes on a channel of a stream. len(data) must not
// exceed MaxPayload-1; senders keep it at most MaxData.
func (c *Conn) WriteData(stream uint32, ch Channel, data []byte) error {
	return c.WriteFrame(TypeData, stream, []byte{byte(ch)}, data)
}

// WriteEOF says that no more data follows on a channel of a stream.
func (c *Conn) WriteEOF(stream uint32, ch Channel) error {
	return c.WriteFrame(TypeEOF, stream, []byte{byte(ch)})
}

// WriteWindow grants the peer n more bytes of credit on a channel of a
// stream.
func (c *Conn) WriteWindow(stream uint32, ch Channel, n uint32) error {
	var p [5]byte
	p[0] = byte(ch)
	binary.BigEndian.PutUint32(p[1:], n)
	return c.WriteFrame(TypeWindow, stream, p[:])
}

// Close closes the underlying stream.
func (c *Conn) Close() error { return c.rwc.Close() }
