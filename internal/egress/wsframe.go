package egress

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sbx-dev/sbx/policy"
)

// WebSocket framing (RFC 6455, section 5), as far as the engine needs it
// to look inside an upgraded stream: a header parser over the bytes read
// so far, the sequencing rules of fragmented messages, and an encoder.

const (
	wsContinuation = 0x0
	wsText         = 0x1
	wsBinary       = 0x2
	wsClose        = 0x8
	wsPing         = 0x9
	wsPong         = 0xa
)

// Close codes the engine sends (RFC 6455, section 7.4.1).
const (
	wsCloseProtocolError   = 1002
	wsClosePolicyViolation = 1008
)

// wsMaxControl is the longest payload a control frame may carry.
const wsMaxControl = 125

// wsHeader is one frame's header.
type wsHeader struct {
	fin    bool
	opcode byte
	masked bool
	key    [4]byte
	length uint64
}

func (h wsHeader) control() bool { return h.opcode&0x8 != 0 }

// wsError ends a WebSocket stream: the close code the guest is sent, the
// reason for the audit log and, when it names a rule, that rule.
type wsError struct {
	code   uint16
	reason string
	// short, when set, is the close frame's reason (which has room for
	// 123 bytes); otherwise reason is cut to fit.
	short string
	rule  policy.Origin
}

func (e *wsError) Error() string { return e.reason }

func (e *wsError) brief() string {
	s := e.short
	if s == "" {
		s = "sbx egress: " + e.reason
	}
	return strings.ToValidUTF8(oneLine(s), "?")
}

func wsProtocolError(format string, args ...any) *wsError {
	return &wsError{code: wsCloseProtocolError, reason: fmt.Sprintf(format, args...)}
}

// parseWSHeader parses the frame header at the start of b, which comes
// from the client when fromClient. It returns the header and its length,
// or a zero length when b holds only the start of one. It refuses what
// RFC 6455 forbids and what no extension can make legal here (none is
// ever negotiated, see offerNoWSExtensions): a reserved bit set, an
// unknown opcode, a control frame that is fragmented or longer than 125
// bytes, a 64-bit length with its top bit set, a client frame that is
// not masked and a server frame that is.
func parseWSHeader(b []byte, fromClient bool) (wsHeader, int, error) {
	if len(b) < 2 {
		return wsHeader{}, 0, nil
	}
	var h wsHeader
	h.fin = b[0]&0x80 != 0
	if b[0]&0x70 != 0 {
		return h, 0, wsProtocolError("a frame has reserved bits set (%#x), but no extension was negotiated", b[0]&0x70)
	}
	h.opcode = b[0] & 0x0f
	switch h.opcode {
	case wsContinuation, wsText, wsBinary, wsClose, wsPing, wsPong:
	default:
		return h, 0, wsProtocolError("a frame has the reserved opcode %#x", h.opcode)
	}
	h.masked = b[1]&0x80 != 0
	if h.masked != fromClient {
		if fromClient {
			return h, 0, wsProtocolError("a client frame is not masked")
		}
		return h, 0, wsProtocolError("a server frame is masked")
	}
	n := 2
	switch l := b[1] & 0x7f; l {
	case 126:
		if len(b) < n+2 {
			return h, 0, nil
		}
		h.length = uint64(binary.BigEndian.Uint16(b[n:]))
		n += 2
	case 127:
		if len(b) < n+8 {
			return h, 0, nil
		}
		h.length = binary.BigEndian.Uint64(b[n:])
		if h.length>>63 != 0 {
			return h, 0, wsProtocolError("a frame's 64-bit length has its top bit set")
		}
		n += 8
	default:
		h.length = uint64(l)
	}
	if h.control() {
		if !h.fin {
			return h, 0, wsProtocolError("a control frame (opcode %#x) is fragmented", h.opcode)
		}
		if h.length > wsMaxControl {
			return h, 0, wsProtocolError("a control frame (opcode %#x) carries %d bytes; at most %d are allowed", h.opcode, h.length, wsMaxControl)
		}
	}
	if h.masked {
		if len(b) < n+4 {
			return h, 0, nil
		}
		copy(h.key[:], b[n:])
		n += 4
	}
	return h, n, nil
}

// wsSequence holds one direction to the rules of fragmentation: a
// message starts with a text or binary frame and goes on with
// continuation frames up to one with FIN; control frames may come
// between them.
type wsSequence struct {
	inMessage bool
}

func (s *wsSequence) next(h wsHeader) error {
	switch {
	case h.control():
		return nil
	case h.opcode == wsContinuation && !s.inMessage:
		return wsProtocolError("a continuation frame with no message to continue")
	case h.opcode != wsContinuation && s.inMessage:
		return wsProtocolError("a new message began before the last one ended")
	}
	s.inMessage = !h.fin
	return nil
}

// appendWSFrame appends an unmasked frame (as a server sends them).
func appendWSFrame(dst []byte, fin bool, opcode byte, payload []byte) []byte {
	b0 := opcode
	if fin {
		b0 |= 0x80
	}
	switch n := len(payload); {
	case n <= 125:
		dst = append(dst, b0, byte(n))
	case n <= 0xffff:
		dst = append(dst, b0, 126)
		dst = binary.BigEndian.AppendUint16(dst, uint16(n))
	default:
		dst = append(dst, b0, 127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	return append(dst, payload...)
}

// appendWSClose appends a close frame with code and as much of reason
// as fits in a control frame, cut at a character boundary.
func appendWSClose(dst []byte, code uint16, reason string) []byte {
	p := binary.BigEndian.AppendUint16(make([]byte, 0, wsMaxControl), code)
	return appendWSFrame(dst, true, wsClose, append(p, truncateUTF8(reason, wsMaxControl-2)...))
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// wsUnmask XORs p with key, p being the payload's bytes from offset pos.
func wsUnmask(p []byte, key [4]byte, pos uint64) {
	for i := range p {
		p[i] ^= key[(pos+uint64(i))%4]
	}
}
