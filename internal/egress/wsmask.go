package egress

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/sbx-dev/sbx/policy"
)

// Upgraded streams. When the policy holds secrets, every upgrade the
// guest asks for is a WebSocket or is refused, and every WebSocket is
// relayed frame by frame rather than spliced, whether or not its upgrade
// request had a placeholder substituted: a value can come back on a
// stream opened without one (the HTTP bodies are masked on the same
// terms), and the guest's frames to a host a secret is not bound to are
// checked as its request bodies are. A policy without secrets splices
// upgraded streams as they are.
//
//   - Server to guest: the payload of every text and binary message goes
//     through the response masker (the replacer of mask.go, the one the
//     HTTP bodies use) as one stream per message, so a value split across
//     fragments, across reads or around an interleaved control frame is
//     masked whole. The engine re-frames as it goes (RFC 6455 lets an
//     intermediary refragment when no extension is in use): each read of
//     the upstream yields a frame of what is certain, and bytes that could
//     start a value wait for the next. Bytes cannot wait past the end of a
//     message, so a value the upstream splits across two messages is
//     caught when its second part comes and the stream closed (1008)
//     before that part goes out. Control frames are masked on their own
//     and cut to 125 bytes if the placeholder is longer than the value.
//   - Guest to server: frames are passed on unmodified, but the unmasked
//     payload of every data frame (as one stream over the whole
//     connection) and of every control frame is checked for the
//     placeholders and values of the secrets not bound to the host; on a
//     match the upstream connection is closed before the chunk that
//     completes it leaves, the guest gets a close frame with 1008 (policy
//     violation) and the audit log the refusal. Placeholders are not
//     substituted in frames unless the secret has a websocket block
//     (wsbody.go, which then holds each message whole, bounded): without
//     one, a placeholder sent to the secret's own host goes as it is,
//     like one in a request body.
//   - Extensions: none is offered upstream (offerNoWSExtensions), and a
//     101 that accepts one anyway is refused, so no frame is compressed
//     where a value could hide from the masker.
//   - Both directions are held to RFC 6455's framing (parseWSHeader,
//     wsSequence); a violation closes the stream with 1002. Memory per
//     stream is bounded by one read (32 KiB) plus the longest value: no
//     frame or message is buffered whole, so none needs a size limit —
//     except the guest's messages on a stream a secret is substituted
//     into, held whole up to wsMaxMessage.

// wsReadSize is how much of the upstream is read at a time.
const wsReadSize = 32 << 10

// wsCloseWait bounds how long a refusal waits for the guest to be handed
// its close frame before the stream is torn down anyway.
const wsCloseWait = 5 * time.Second

// upgradeRefusal returns why the upgrade h asks for is refused, or "".
// With secrets in the policy only WebSocket is allowed: any other
// protocol (h2c, or anything a server may switch to) would carry bytes
// nothing checks. An Upgrade header without the Connection token is
// dropped on the way anyway (it is hop-by-hop).
func (p *Policy) upgradeRefusal(h http.Header) string {
	if p.mask == nil && len(p.logins) == 0 || !httpguts.HeaderValuesContainsToken(h["Connection"], "upgrade") {
		return ""
	}
	vals := h.Values("Upgrade")
	if len(vals) == 0 || len(vals) == 1 && strings.EqualFold(strings.TrimSpace(vals[0]), "websocket") {
		return ""
	}
	return fmt.Sprintf("upgrade to %q is not allowed: with secrets in the policy only WebSocket upgrades are, whose frames are checked for secret values",
		strings.Join(vals, ", "))
}

// offerNoWSExtensions drops the WebSocket extensions the guest offers
// (permessage-deflate in practice) from a request whose stream will be
// checked, so that the server never compresses a frame. Compressed
// frames could be masked only by inflating what the upstream sends and
// deflating it again for the guest, keeping both sides' compression
// contexts and bounding the inflation; the cost of refusing is
// bandwidth, which on an API's stream is small next to what it answers.
func offerNoWSExtensions(h http.Header) {
	h.Del("Sec-WebSocket-Extensions")
}

// upgraded takes over a 101 response for modifyResponse: the stream must
// be the WebSocket asked for, with no extension, and its body (the
// upstream connection) is replaced by a wsConn that relays it checked.
func (e *Engine) upgraded(rs *requestState, res *http.Response) error {
	if up := res.Header.Get("Upgrade"); !strings.EqualFold(strings.TrimSpace(up), "websocket") {
		return fmt.Errorf("the upstream switched to %q; with secrets in the policy only WebSocket streams are relayed", up)
	}
	if ext := res.Header.Values("Sec-WebSocket-Extensions"); len(ext) > 0 {
		return fmt.Errorf("the upstream accepted the WebSocket extension %q, which was not offered (its frames could not be checked for secret values)", strings.Join(ext, ", "))
	}
	conn, ok := res.Body.(io.ReadWriteCloser)
	if !ok {
		return errors.New("a 101 response whose body is not the upstream connection")
	}
	rs.ws = newWSConn(conn, rs.mask, rs.st.pol, rs.name)
	res.Body = rs.ws
	return nil
}

// wsConn stands for the upstream connection of a WebSocket: reading it
// yields the upstream's frames masked, writing it checks the guest's
// frames and passes them on. ReverseProxy copies each way on its own
// goroutine.
type wsConn struct {
	up   io.ReadWriteCloser
	down wsDown
	upw  wsUp

	// read side
	rbuf, obuf, out []byte
	rerr            error
	closeQueued     bool
	// write side
	wbuf []byte

	mu      sync.Mutex
	refusal *wsError
	// handed is closed once the read side has handed out its last bytes
	// (the close frame after a refusal) or stopped.
	handed     chan struct{}
	handedOnce sync.Once
}

func newWSConn(up io.ReadWriteCloser, mask *replacer, p *Policy, host string) *wsConn {
	c := &wsConn{up: up, rbuf: make([]byte, wsReadSize), handed: make(chan struct{})}
	c.down = newWSDown(mask)
	c.upw.host = host
	for _, s := range p.secrets {
		if !s.bound(host) {
			c.upw.secrets = append(c.upw.secrets, s)
		}
	}
	c.upw.secrets = append(c.upw.secrets, p.loginScanSecrets(host)...)
	for _, s := range p.secrets {
		if s.WebSocket != nil && s.bound(host) {
			c.upw.subst = append(c.upw.subst, s)
		}
	}
	c.upw.init()
	return c
}

// refused returns the refusal that ended the stream, if one did.
func (c *wsConn) refused() *wsError {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refusal
}

// refuse records r (the first refusal wins) and closes the upstream
// connection, which also wakes the read side to send the guest its close.
func (c *wsConn) refuse(r *wsError) {
	c.mu.Lock()
	if c.refusal == nil {
		c.refusal = r
	}
	c.mu.Unlock()
	c.up.Close()
}

func asWSError(err error) *wsError {
	var we *wsError
	if errors.As(err, &we) {
		return we
	}
	return wsProtocolError("%v", err)
}

func (c *wsConn) Read(p []byte) (int, error) {
	for {
		if len(c.out) > 0 {
			n := copy(p, c.out)
			c.out = c.out[n:]
			return n, nil
		}
		if c.closeQueued {
			c.doneReading()
			return 0, io.EOF
		}
		if r := c.refused(); r != nil {
			c.obuf = appendWSClose(c.obuf[:0], r.code, r.brief())
			c.out, c.closeQueued = c.obuf, true
			continue
		}
		if c.rerr != nil {
			c.doneReading()
			return 0, c.rerr
		}
		n, err := c.up.Read(c.rbuf)
		if n > 0 {
			var ferr error
			c.obuf, ferr = c.down.feed(c.obuf[:0], c.rbuf[:n])
			c.out = c.obuf
			if ferr != nil {
				r := asWSError(ferr)
				if r.code == wsCloseProtocolError {
					r.reason = "the upstream broke the WebSocket protocol: " + r.reason
				}
				c.refuse(r)
			}
		}
		if err != nil {
			c.rerr = err
		}
	}
}

func (c *wsConn) doneReading() { c.handedOnce.Do(func() { close(c.handed) }) }

func (c *wsConn) Write(p []byte) (int, error) {
	if r := c.refused(); r != nil {
		return 0, r
	}
	fwd, ferr := c.upw.feed(c.wbuf[:0], p)
	c.wbuf = fwd[:0]
	if len(fwd) > 0 {
		if _, err := c.up.Write(fwd); err != nil {
			return 0, err
		}
	}
	if ferr != nil {
		r := asWSError(ferr)
		c.refuse(r)
		// Give the read side the time to hand the guest its close frame:
		// once this returns, ReverseProxy closes the guest's connection.
		t := time.NewTimer(wsCloseWait)
		defer t.Stop()
		select {
		case <-c.handed:
		case <-t.C:
		}
		return 0, r
	}
	return len(p), nil
}

func (c *wsConn) Close() error {
	return c.up.Close()
}

// wsDown masks the frames a server sends: it is fed the upstream's bytes
// as they come and returns the frames for the guest.
type wsDown struct {
	mask *replacer
	seq  wsSequence
	buf  []byte // input not consumed yet: part of a header or control frame

	inFrame bool     // a data frame's payload is being read
	hdr     wsHeader // that frame's header
	left    uint64   // its payload bytes still to come
	msgOp   byte     // the opcode of the message being relayed
	started bool     // a frame of that message went to the guest
	held    []byte   // the message's bytes that could start a value
	tmp     []byte

	// Across messages: tail is the end of the data payload the guest was
	// given (the longest value less one byte at most), and a message
	// starts with the part of it that could start a value held as if
	// unsent (skip bytes of held), so that a value the upstream splits
	// across two messages is caught when its rest comes. Bytes cannot
	// move between messages, so that stream is refused.
	keep  int
	tail  []byte
	carry []byte
	skip  int
}

func newWSDown(mask *replacer) wsDown {
	d := wsDown{mask: mask}
	for _, o := range mask.old {
		d.keep = max(d.keep, len(o)-1)
	}
	if mask.runs != nil {
		d.keep = max(d.keep, mask.runs.longest-1)
	}
	return d
}

// feed appends to dst the frames in that in (after what earlier calls
// were fed) lets the guest have, masked.
func (d *wsDown) feed(dst, in []byte) ([]byte, error) {
	d.buf = append(d.buf, in...)
	b := d.buf
	defer func() { d.buf = append(d.buf[:0], b...) }()
	for {
		if d.inFrame {
			k := d.left
			if uint64(len(b)) < k {
				k = uint64(len(b))
			}
			if k == 0 && d.left > 0 {
				return dst, nil
			}
			chunk := b[:k]
			b = b[k:]
			d.left -= k
			if d.left == 0 {
				d.inFrame = false
			}
			var err error
			if dst, err = d.relay(dst, chunk, !d.inFrame && d.hdr.fin); err != nil {
				return dst, err
			}
			continue
		}
		h, n, err := parseWSHeader(b, false)
		if err != nil {
			return dst, err
		}
		if n == 0 {
			return dst, nil
		}
		if h.control() {
			if uint64(len(b)-n) < h.length {
				return dst, nil // the rest of the control frame is still to come
			}
			dst, err = d.control(dst, h.opcode, b[n:n+int(h.length)])
			if err != nil {
				return dst, err
			}
			b = b[n+int(h.length):]
			continue
		}
		if err := d.seq.next(h); err != nil {
			return dst, err
		}
		b = b[n:]
		if h.opcode != wsContinuation {
			d.msgOp, d.started = h.opcode, false
			d.carry = append(d.carry[:0], d.tail[len(d.tail)-d.mask.heldTail(d.tail):]...)
			d.held = append(d.held[:0], d.carry...)
			d.skip = len(d.carry)
		}
		d.hdr, d.left, d.inFrame = h, h.length, true
	}
}

// relay masks the next chunk of the current message and appends what is
// certain of it as a frame; last ends the message.
func (d *wsDown) relay(dst, chunk []byte, last bool) ([]byte, error) {
	in := append(d.held, chunk...)
	out, rest := d.mask.process(d.tmp[:0], in, last)
	if d.skip > 0 {
		// The carried bytes were sent with the last message: they must
		// come out as they are (a value starting in them would be masked
		// otherwise), and are not sent again.
		if !wsStartsWith(out, rest, d.carry[:d.skip]) {
			return dst, &wsError{code: wsClosePolicyViolation,
				reason: "the upstream sent a secret's value split across two WebSocket messages, which cannot be masked; the stream was closed"}
		}
		n := min(d.skip, len(out))
		out, d.skip = out[n:], d.skip-n
		d.carry = d.carry[n:]
	}
	d.held = append(in[:0], rest...)
	d.tmp = out[:0]
	if len(out) == 0 && !last {
		return dst, nil
	}
	d.tail = append(d.tail, out...)
	d.tail = d.tail[:copy(d.tail, d.tail[max(0, len(d.tail)-d.keep):])]
	op := byte(wsContinuation)
	if !d.started {
		op, d.started = d.msgOp, true
	}
	return appendWSFrame(dst, last, op, out), nil
}

// wsStartsWith reports whether a followed by b starts with p.
func wsStartsWith(a, b, p []byte) bool {
	n := min(len(a), len(p))
	return string(a[:n]) == string(p[:n]) && len(b) >= len(p)-n && string(b[:len(p)-n]) == string(p[n:])
}

// control masks a control frame's payload on its own.
func (d *wsDown) control(dst []byte, op byte, p []byte) ([]byte, error) {
	if op == wsClose {
		switch {
		case len(p) == 0:
			return appendWSFrame(dst, true, op, nil), nil
		case len(p) == 1:
			return dst, wsProtocolError("a close frame with a one-byte payload")
		}
		code := uint16(p[0])<<8 | uint16(p[1])
		return appendWSClose(dst, code, d.mask.replaceString(string(p[2:]))), nil
	}
	m := d.mask.replaceString(string(p))
	if len(m) > wsMaxControl {
		m = m[:wsMaxControl]
	}
	return appendWSFrame(dst, true, op, []byte(m)), nil
}

// wsUp checks the frames a client sends: it is fed the guest's bytes as
// they come and returns those that may go upstream, verbatim.
type wsUp struct {
	host    string
	secrets []*secret // those not bound to host
	deny    *replacer // finds their placeholders and values; nil: none
	keep    int       // the longest of those less one byte

	seq     wsSequence
	buf     []byte // input not consumed yet: part of a header or control frame
	inFrame bool
	key     [4]byte
	left    uint64
	pos     uint64
	window  []byte // the data payload passed on last, unmasked, up to keep bytes
	tmp     []byte

	// subst are the secrets bound to host that are substituted in the
	// guest's messages (wsbody.go). With any, each data message is held
	// whole (msg, its opcode msgOp, fin of the frame being read) and sent
	// on as one frame once it ends.
	subst []*secret
	msg   []byte
	msgOp byte
	fin   bool
}

func (u *wsUp) init() {
	var pairs [][2]string
	for _, s := range u.secrets {
		pairs = append(pairs, [2]string{string(s.value), ""}, [2]string{s.placeholder, ""})
		u.keep = max(u.keep, len(s.value)-1, len(s.placeholder)-1)
	}
	if pairs != nil {
		u.deny = newReplacer(pairs)
	}
}

// feed appends to dst the bytes of in (after what earlier calls were
// fed) that may go upstream; on a refusal the bytes that would complete
// a denied string are not among them.
func (u *wsUp) feed(dst, in []byte) ([]byte, error) {
	u.buf = append(u.buf, in...)
	b := u.buf
	defer func() { u.buf = append(u.buf[:0], b...) }()
	for {
		if u.inFrame {
			k := u.left
			if uint64(len(b)) < k {
				k = uint64(len(b))
			}
			if k == 0 && u.left > 0 {
				return dst, nil
			}
			if err := u.checkData(b[:k]); err != nil {
				return dst, err
			}
			if u.subst != nil {
				if err := u.hold(b[:k]); err != nil {
					return dst, err
				}
			} else {
				dst = append(dst, b[:k]...)
			}
			b = b[k:]
			u.left -= k
			u.pos += k
			u.inFrame = u.left > 0
			if !u.inFrame && u.fin && u.subst != nil {
				var err error
				if dst, err = u.endMessage(dst); err != nil {
					return dst, err
				}
			}
			continue
		}
		h, n, err := parseWSHeader(b, true)
		if err != nil {
			return dst, err
		}
		if n == 0 {
			return dst, nil
		}
		if h.control() {
			end := n + int(h.length)
			if len(b) < end {
				return dst, nil
			}
			u.tmp = append(u.tmp[:0], b[n:end]...)
			wsUnmask(u.tmp, h.key, 0)
			if err := u.check(string(u.tmp)); err != nil {
				return dst, err
			}
			if err := u.checkControl(string(u.tmp)); err != nil {
				return dst, err
			}
			dst = append(dst, b[:end]...)
			b = b[end:]
			continue
		}
		if err := u.seq.next(h); err != nil {
			return dst, err
		}
		if u.subst == nil {
			dst = append(dst, b[:n]...)
		} else if h.opcode != wsContinuation {
			u.msgOp, u.msg = h.opcode, u.msg[:0]
		}
		b = b[n:]
		u.key, u.left, u.pos, u.inFrame, u.fin = h.key, h.length, 0, true, h.fin
		if h.length == 0 && u.subst != nil {
			u.inFrame = false
			if h.fin {
				if dst, err = u.endMessage(dst); err != nil {
					return dst, err
				}
			}
		}
	}
}

// checkData checks the next chunk of data payload, with the end of what
// went before it, so that a value split across frames or messages is
// found when its last byte comes.
func (u *wsUp) checkData(chunk []byte) error {
	if u.deny == nil {
		return nil
	}
	u.tmp = append(append(u.tmp[:0], u.window...), chunk...)
	wsUnmask(u.tmp[len(u.window):], u.key, u.pos)
	if err := u.check(string(u.tmp)); err != nil {
		return err
	}
	u.window = append(u.window[:0], u.tmp[max(0, len(u.tmp)-u.keep):]...)
	return nil
}

func (u *wsUp) check(s string) error {
	if u.deny == nil || u.deny.replaceString(s) == s {
		return nil
	}
	for _, sec := range u.secrets {
		if newReplacer([][2]string{{string(sec.value), ""}, {sec.placeholder, ""}}).replaceString(s) != s {
			d := sec.denial(u.host, "a WebSocket frame")
			return &wsError{code: wsClosePolicyViolation, reason: d.reason, rule: d.rule,
				short: fmt.Sprintf("sbx egress: secret %q may not be sent to %s", sec.Name, u.host)}
		}
	}
	return &wsError{code: wsClosePolicyViolation, reason: "a secret appears in a WebSocket frame to " + u.host}
}

// streamRefusal returns the refusal that ended rs's upgraded stream.
func (rs *requestState) streamRefusal() (reason string, rule policy.Origin, refused bool) {
	if rs.ws == nil {
		return "", policy.Origin{}, false
	}
	r := rs.ws.refused()
	if r == nil {
		return "", policy.Origin{}, false
	}
	return r.reason, r.rule, true
}
