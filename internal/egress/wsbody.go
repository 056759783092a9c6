package egress

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
)

// Secrets in WebSocket messages. A secret whose binding has a websocket
// block (policy.WebSocketField) is substituted into the guest's messages
// to its hosts, whole-token only: in a text message whose whole content
// is its placeholder, or, with a json_field, in a text message that is
// one JSON object whose string at that path is the placeholder (the
// rules of substituteJSON: no repeated key, no escaped placeholder). On a
// stream to such a host the engine holds each of the guest's data
// messages whole — its fragments reassembled, at most wsMaxMessage bytes
// (a longer one closes the stream with 1009) — and sends it on as one
// frame, with a mask of its own, once it ends; control frames between its
// fragments go on at once. A placeholder anywhere else — part of a text
// message, another JSON field, a binary message, a control frame — closes
// the stream with 1008 before the message leaves.

// wsMaxMessage bounds a guest message held for substitution.
const wsMaxMessage = 64 << 10

// wsCloseTooBig is the close code for a message too big to process.
const wsCloseTooBig = 1009

// hold appends the next chunk of the current message's payload, unmasked.
func (u *wsUp) hold(chunk []byte) error {
	if len(u.msg)+len(chunk) > wsMaxMessage {
		return &wsError{code: wsCloseTooBig, rule: u.subst[0].Origin,
			reason: fmt.Sprintf("a WebSocket message to %s is longer than %d bytes, the most the host holds to substitute secret %q into (%s)", u.host, wsMaxMessage, u.subst[0].Name, originString(u.subst[0].Origin)),
			short:  fmt.Sprintf("sbx egress: message longer than %d bytes", wsMaxMessage)}
	}
	start := len(u.msg)
	u.msg = append(u.msg, chunk...)
	wsUnmask(u.msg[start:], u.key, u.pos)
	return nil
}

// endMessage substitutes the secrets into the message held and appends
// it to dst as one masked frame.
func (u *wsUp) endMessage(dst []byte) ([]byte, error) {
	msg := u.msg
	for _, s := range u.subst {
		out, err := substituteWS(msg, u.msgOp == wsText, s)
		if err != nil {
			return dst, &wsError{code: wsClosePolicyViolation, rule: s.Origin,
				reason: fmt.Sprintf("secret %q in a WebSocket message to %s: %s; it is substituted only as %s (%s)", s.Name, u.host, err, s.WebSocket.Place(), originString(s.Origin)),
				short:  fmt.Sprintf("sbx egress: secret %q is not substituted there", s.Name)}
		}
		msg = out
	}
	var key [4]byte
	rand.Read(key[:])
	dst = appendWSMaskedFrame(dst, u.msgOp, msg, key)
	u.msg = u.msg[:0]
	return dst, nil
}

// substituteWS returns msg with s's value where its websocket block puts
// it; msg unchanged when the placeholder is not in it.
func substituteWS(msg []byte, text bool, s *secret) ([]byte, error) {
	ph := s.placeholder
	if !strings.Contains(string(msg), ph) {
		if text && s.WebSocket.JSON != "" && bytes.Contains(msg, []byte(`\`)) && jsonStringsContain(msg, ph) {
			return nil, fmt.Errorf("the placeholder is written with escapes in a JSON string")
		}
		return msg, nil
	}
	switch {
	case !text:
		return nil, fmt.Errorf("the placeholder is in a binary message")
	case s.WebSocket.JSON == "" && string(msg) == ph:
		return append([]byte(nil), s.value...), nil
	case s.WebSocket.JSON == "":
		return nil, fmt.Errorf("the placeholder is part of a text message")
	}
	out, err := substituteJSON(msg, []string{s.WebSocket.JSON}, ph, string(s.value))
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkControl refuses a control frame of the guest's that carries the
// placeholder of a secret substituted in messages.
func (u *wsUp) checkControl(p string) error {
	for _, s := range u.subst {
		if strings.Contains(p, s.placeholder) {
			return &wsError{code: wsClosePolicyViolation, rule: s.Origin,
				reason: fmt.Sprintf("secret %q in a WebSocket control frame to %s; it is substituted only as %s (%s)", s.Name, u.host, s.WebSocket.Place(), originString(s.Origin)),
				short:  fmt.Sprintf("sbx egress: secret %q is not substituted there", s.Name)}
		}
	}
	return nil
}

// appendWSMaskedFrame appends a final frame masked with key (as a client
// sends them).
func appendWSMaskedFrame(dst []byte, opcode byte, payload []byte, key [4]byte) []byte {
	b0 := 0x80 | opcode
	switch n := len(payload); {
	case n <= 125:
		dst = append(dst, b0, 0x80|byte(n))
	case n <= 0xffff:
		dst = append(dst, b0, 0x80|126)
		dst = binary.BigEndian.AppendUint16(dst, uint16(n))
	default:
		dst = append(dst, b0, 0x80|127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	dst = append(dst, key[:]...)
	start := len(dst)
	dst = append(dst, payload...)
	wsUnmask(dst[start:], key, 0)
	return dst
}

// jsonStringsContain reports whether a key or string of the JSON in msg,
// decoded, contains ph (false for what is not JSON).
func jsonStringsContain(msg []byte, ph string) bool {
	dec := json.NewDecoder(bytes.NewReader(msg))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if s, ok := tok.(string); ok && strings.Contains(s, ph) {
			return true
		}
	}
}
