package egress

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/policy"
)

// testFrame is a frame as the tests' own parser (independent of
// wsframe.go) reads it.
type testFrame struct {
	fin     bool
	rsv     byte
	op      byte
	payload []byte // unmasked
}

// readTestFrame reads one frame of any length, unmasking it.
func readTestFrame(r io.Reader) (testFrame, error) {
	var f testFrame
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return f, err
	}
	f.fin, f.rsv, f.op = hdr[0]&0x80 != 0, hdr[0]&0x70, hdr[0]&0x0f
	n := uint64(hdr[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return f, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return f, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 16<<20 {
		return f, errors.New("test frame too large")
	}
	var key [4]byte
	masked := hdr[1]&0x80 != 0
	if masked {
		if _, err := io.ReadFull(r, key[:]); err != nil {
			return f, err
		}
	}
	f.payload = make([]byte, n)
	if k, err := io.ReadFull(r, f.payload); err != nil {
		f.payload = f.payload[:k] // what came of it, for parseTestFrames
		return f, err
	}
	if masked {
		for i := range f.payload {
			f.payload[i] ^= key[i%4]
		}
	}
	return f, nil
}

// frame encodes a frame; masked frames (the client's) use a fixed key.
func frame(fin bool, rsv, op byte, payload []byte, masked bool) []byte {
	b0 := op | rsv
	if fin {
		b0 |= 0x80
	}
	var m byte
	if masked {
		m = 0x80
	}
	b := []byte{b0}
	switch n := len(payload); {
	case n <= 125:
		b = append(b, m|byte(n))
	case n <= 0xffff:
		b = append(b, m|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, m|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if !masked {
		return append(b, payload...)
	}
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	b = append(b, key[:]...)
	for i, c := range payload {
		b = append(b, c^key[i%4])
	}
	return b
}

func closePayload(code uint16, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, code), reason...)
}

// wsServer is a hostile WebSocket upstream: it switches protocols (with
// permessage-deflate when the request offered it and deflate is set),
// then runs script; it records each upgrade request's headers and the
// frames it read.
type wsServer struct {
	deflate bool
	// extension, when set, is accepted whatever the request offered.
	extension string
	script    func(auth string, deflated bool, w *bufio.ReadWriter)

	mu       sync.Mutex
	headers  []http.Header
	received []testFrame
	done     chan struct{}
}

func newWSServer(script func(auth string, deflated bool, w *bufio.ReadWriter)) *wsServer {
	return &wsServer{script: script, done: make(chan struct{}, 10)}
}

func (s *wsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() { s.done <- struct{}{} }()
	s.mu.Lock()
	s.headers = append(s.headers, r.Header.Clone())
	s.mu.Unlock()
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	ext := s.extension
	deflated := s.deflate && strings.Contains(r.Header.Get("Sec-WebSocket-Extensions"), "permessage-deflate")
	if deflated {
		ext = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
	}
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n",
		r.Header.Get("Upgrade"), wsAccept(r.Header.Get("Sec-WebSocket-Key")))
	if ext != "" {
		fmt.Fprintf(brw, "Sec-WebSocket-Extensions: %s\r\n", ext)
	}
	brw.WriteString("\r\n")
	brw.Flush()
	s.script(r.Header.Get("Authorization"), deflated, brw)
	brw.Flush()
}

// record reads the guest's frames until the connection ends, echoing
// every data frame as a text frame.
func (s *wsServer) record(w *bufio.ReadWriter) {
	for {
		f, err := readTestFrame(w)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.received = append(s.received, f)
		s.mu.Unlock()
		if f.op == wsClose {
			w.Write(frame(true, 0, wsClose, f.payload, false))
			w.Flush()
			return
		}
		if f.op <= wsBinary {
			w.Write(frame(f.fin, 0, f.op, f.payload, false))
			w.Flush()
		}
	}
}

// receivedPayload is every payload byte the upstream read.
func (s *wsServer) receivedPayload() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b []byte
	for _, f := range s.received {
		b = append(b, f.payload...)
	}
	return b
}

// wsGuest is the guest's side of one WebSocket through the engine.
type wsGuest struct {
	t    *testing.T
	conn io.ReadWriteCloser
	br   *bufio.Reader
	raw  bytes.Buffer // every byte read after the upgrade's header
	res  *http.Response
}

// dialWS upgrades a connection to name as the guest, with the secret's
// placeholder as a Bearer token when auth, and the extra header lines.
func dialWS(t *testing.T, h *harness, name string, auth bool, extra ...string) *wsGuest {
	t.Helper()
	c, err := h.guestTLS(name, 443, name, "http/1.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	req := fmt.Sprintf("GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n", name, key)
	if auth {
		req += "Authorization: Bearer " + tokenPH + "\r\n"
	}
	for _, e := range extra {
		req += e + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	g := &wsGuest{t: t, conn: c, br: bufio.NewReader(c)}
	g.res, err = http.ReadResponse(g.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *wsGuest) send(b []byte) {
	g.t.Helper()
	if _, err := g.conn.Write(b); err != nil {
		g.t.Fatal(err)
	}
}

// messages reads until a close frame or the end of the stream and
// returns the messages (fragments joined; inflated when deflated and the
// frame says so), the control frames and the close frame (nil if none).
func (g *wsGuest) messages(deflated bool) (msgs [][]byte, controls []testFrame, closing *testFrame) {
	r := io.TeeReader(g.br, &g.raw)
	var cur []byte
	compressed := false
	for {
		f, err := readTestFrame(r)
		if err != nil {
			return msgs, controls, nil
		}
		if f.rsv&0x40 != 0 {
			compressed = true
		}
		switch {
		case f.op == wsClose:
			return msgs, controls, &f
		case f.op >= wsClose:
			controls = append(controls, f)
			continue
		}
		cur = append(cur, f.payload...)
		if f.fin {
			if compressed && deflated {
				zr := flate.NewReader(bytes.NewReader(append(cur, 0, 0, 0xff, 0xff)))
				cur, _ = io.ReadAll(zr)
			}
			msgs = append(msgs, cur)
			cur, compressed = nil, false
		}
	}
}

// deflate compresses p as permessage-deflate does (the final empty
// block's tail removed).
func deflate(p []byte) []byte {
	var b bytes.Buffer
	zw, _ := flate.NewWriter(&b, flate.BestSpeed)
	zw.Write(p)
	zw.Flush()
	return bytes.TrimSuffix(b.Bytes(), []byte{0, 0, 0xff, 0xff})
}

// TestWebSocketEchoesMasked plays an upstream, the secret's own host,
// that echoes the substituted Authorization header back over the
// WebSocket in every shape a frame stream allows. The guest must never
// read the value, and where the echo is one message it must read the
// placeholder in its place.
func TestWebSocketEchoesMasked(t *testing.T) {
	split := len("Bearer ") + 10 // inside the value
	type script func(auth string, w io.Writer)
	cases := []struct {
		name  string
		whole bool // the echo is in one data message
		send  script
	}{
		{"text frame", true, func(a string, w io.Writer) {
			w.Write(frame(true, 0, wsText, []byte(`{"echo":"`+a+`"}`), false))
		}},
		{"binary frame", true, func(a string, w io.Writer) {
			w.Write(frame(true, 0, wsBinary, append([]byte{0, 1, 2}, a...), false))
		}},
		{"two fragments", true, func(a string, w io.Writer) {
			w.Write(frame(false, 0, wsText, []byte("auth: "+a[:split]), false))
			w.Write(frame(true, 0, wsContinuation, []byte(a[split:]+" end"), false))
		}},
		{"ping between fragments", true, func(a string, w io.Writer) {
			w.Write(frame(false, 0, wsBinary, []byte(a[:split]), false))
			w.Write(frame(true, 0, wsPing, []byte("between"), false))
			w.Write(frame(true, 0, wsContinuation, []byte(a[split:]), false))
		}},
		{"one byte a fragment", true, func(a string, w io.Writer) {
			w.Write(frame(false, 0, wsText, []byte(a[:1]), false))
			for i := 1; i < len(a)-1; i++ {
				w.Write(frame(false, 0, wsContinuation, []byte(a[i:i+1]), false))
				if i%5 == 0 {
					w.Write(frame(true, 0, wsPong, nil, false))
				}
			}
			w.Write(frame(true, 0, wsContinuation, []byte(a[len(a)-1:]), false))
		}},
		{"frame split across writes", true, func(a string, w io.Writer) {
			f := frame(true, 0, wsText, []byte("x "+a+" y"), false)
			w.Write(f[:6+split])
			w.(*bufio.ReadWriter).Flush()
			w.Write(f[6+split:])
		}},
		{"across a large frame's reads", true, func(a string, w io.Writer) {
			p := bytes.Repeat([]byte("filler. "), 40<<10/8)
			p = append(p[:wsReadSize-split-2], append([]byte(a), p[wsReadSize-split-2+len(a):]...)...)
			w.Write(frame(true, 0, wsBinary, p, false))
		}},
		{"in a ping", false, func(a string, w io.Writer) {
			w.Write(frame(true, 0, wsPing, []byte(a), false))
		}},
		{"in the close reason", false, func(a string, w io.Writer) {
			w.Write(frame(true, 0, wsClose, closePayload(4000, "bad "+a), false))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newWSServer(func(auth string, _ bool, w *bufio.ReadWriter) {
				w.Write(frame(true, 0, wsText, []byte("hello"), false))
				tc.send(auth, w)
				w.Write(frame(true, 0, wsClose, closePayload(1000, "bye"), false))
			})
			h, _ := secretHarness(t, srv)
			g := dialWS(t, h, "api.test", true)
			if g.res.StatusCode != 101 {
				t.Fatalf("upgrade: %d", g.res.StatusCode)
			}
			msgs, controls, closing := g.messages(false)
			if bytes.Contains(g.raw.Bytes(), []byte(tokenValue)) {
				t.Fatalf("the guest read the secret's value: %q", g.raw.Bytes())
			}
			if closing == nil {
				t.Fatalf("no close frame; read %q", g.raw.Bytes())
			}
			var all []byte
			for _, m := range msgs {
				all = append(all, m...)
			}
			for _, c := range append(controls, *closing) {
				all = append(all, c.payload...)
			}
			if !bytes.Contains(all, []byte(tokenPH)) {
				t.Errorf("the placeholder is not where the echo was: messages %q controls %v close %q", msgs, controls, closing.payload)
			}
			if tc.whole && len(msgs) != 2 {
				t.Errorf("%d messages, want 2: %q", len(msgs), msgs)
			}
		})
	}
}

// TestWebSocketValueAcrossMessages plays an upstream that sends the
// echo's first part as one message and its rest as the next, where no
// masking can put one placeholder over both. A first part shorter than
// runLen could start a run: the stream is closed (1008) before the rest
// goes out. A longer one is a run, masked in its own message; so is a
// rest of runLen bytes or more, and a shorter rest is all that passes.
func TestWebSocketValueAcrossMessages(t *testing.T) {
	for _, split := range []int{1, 10, runLen, 20, len(tokenValue) - 1} {
		t.Run(fmt.Sprint(split), func(t *testing.T) {
			srv := newWSServer(func(auth string, _ bool, w *bufio.ReadWriter) {
				v := strings.TrimPrefix(auth, "Bearer ")
				w.Write(frame(true, 0, wsText, []byte("one "+v[:split]), false))
				w.Write(frame(true, 0, wsPing, nil, false))
				w.Write(frame(true, 0, wsText, []byte(v[split:]+" two"), false))
				w.Write(frame(true, 0, wsClose, closePayload(1000, "bye"), false))
			})
			h, _ := secretHarness(t, srv)
			g := dialWS(t, h, "api.test", true)
			if g.res.StatusCode != 101 {
				t.Fatalf("upgrade: %d", g.res.StatusCode)
			}
			msgs, _, closing := g.messages(false)
			if run := valueRun(string(bytes.Join(msgs, nil)), tokenValue, runLen); run != "" {
				t.Fatalf("the guest can join %q of the value from its messages: %q", run, msgs)
			}
			if split < runLen {
				if closing == nil || binary.BigEndian.Uint16(closing.payload) != wsClosePolicyViolation {
					t.Fatalf("close %+v, want %d; messages %q", closing, wsClosePolicyViolation, msgs)
				}
				if len(msgs) != 1 {
					t.Errorf("messages %q, want the first only", msgs)
				}
				return
			}
			rest := tokenValue[split:]
			if len(rest) >= runLen {
				rest = tokenPH
			}
			if want := []string{"one " + tokenPH, rest + " two"}; len(msgs) != 2 || string(msgs[0]) != want[0] || string(msgs[1]) != want[1] {
				t.Errorf("messages %q, want %q", msgs, want)
			}
		})
	}
}

// TestWebSocketDeflateRefused plays an upstream that compresses its echo
// with permessage-deflate whenever the guest's offer lets it, and one
// that accepts the extension although it was never offered, and one that
// sets the compression bit without any extension.
func TestWebSocketDeflateRefused(t *testing.T) {
	echo := func(auth string, deflated bool, w *bufio.ReadWriter) {
		if deflated {
			w.Write(frame(true, 0x40, wsText, deflate([]byte("echo "+auth)), false))
		} else {
			w.Write(frame(true, 0, wsText, []byte("echo "+auth), false))
		}
		w.Write(frame(true, 0, wsClose, closePayload(1000, ""), false))
	}
	offer := "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits"

	t.Run("offer dropped", func(t *testing.T) {
		srv := newWSServer(echo)
		srv.deflate = true
		h, _ := secretHarness(t, srv)
		g := dialWS(t, h, "api.test", true, offer)
		if g.res.StatusCode != 101 {
			t.Fatalf("upgrade: %d", g.res.StatusCode)
		}
		deflated := g.res.Header.Get("Sec-WebSocket-Extensions") != ""
		msgs, _, _ := g.messages(deflated)
		if bytes.Contains(bytes.Join(msgs, nil), []byte(tokenValue)) || bytes.Contains(g.raw.Bytes(), []byte(tokenValue)) {
			t.Fatalf("the guest read the value (deflate negotiated: %v): %q", deflated, msgs)
		}
		if len(msgs) != 1 || !bytes.Contains(msgs[0], []byte(tokenPH)) {
			t.Errorf("messages %q, want the placeholder's echo", msgs)
		}
		<-srv.done
		if ext := srv.headers[0].Get("Sec-WebSocket-Extensions"); ext != "" {
			t.Errorf("the upstream was offered %q", ext)
		}
	})

	t.Run("accepted unoffered", func(t *testing.T) {
		srv := newWSServer(echo)
		srv.extension = "permessage-deflate"
		h, _ := secretHarness(t, srv)
		g := dialWS(t, h, "api.test", true, offer)
		if g.res.StatusCode != http.StatusBadGateway {
			t.Fatalf("an upstream accepting an extension nobody offered: %d, want 502", g.res.StatusCode)
		}
	})

	t.Run("compressed bit without extension", func(t *testing.T) {
		srv := newWSServer(func(auth string, _ bool, w *bufio.ReadWriter) {
			w.Write(frame(true, 0x40, wsText, deflate([]byte("echo "+auth)), false))
			w.Write(frame(true, 0, wsClose, closePayload(1000, ""), false))
		})
		h, _ := secretHarness(t, srv)
		g := dialWS(t, h, "api.test", true, offer)
		if g.res.StatusCode != 101 {
			t.Fatalf("upgrade: %d", g.res.StatusCode)
		}
		msgs, _, closing := g.messages(true)
		if len(msgs) != 0 {
			t.Errorf("the guest got messages %q", msgs)
		}
		if closing == nil || binary.BigEndian.Uint16(closing.payload) != wsCloseProtocolError {
			t.Errorf("close %v, want %d", closing, wsCloseProtocolError)
		}
	})
}

// TestWebSocketGuestFramesChecked plays a guest that sends a secret's
// placeholder or value in WebSocket frames to other.test, an allowed host
// the secret is not bound to, in the shapes a frame stream allows. The
// upgrade carries no credential, so nothing is substituted: the frames
// are checked all the same. The stream must be closed with 1008 before
// the denied string reaches the upstream whole, and the audit log must
// say why.
func TestWebSocketGuestFramesChecked(t *testing.T) {
	ph := []byte(tokenPH)
	cases := []struct {
		name   string
		frames [][]byte
	}{
		{"placeholder in a text frame", [][]byte{frame(true, 0, wsText, append([]byte(`{"key":"`), ph...), true)}},
		{"value in a binary frame", [][]byte{frame(true, 0, wsBinary, []byte("k="+tokenValue), true)}},
		{"placeholder across fragments", [][]byte{
			frame(false, 0, wsText, ph[:20], true),
			frame(true, 0, wsPing, []byte("p"), true),
			frame(true, 0, wsContinuation, ph[20:], true),
		}},
		{"placeholder across messages", [][]byte{
			frame(true, 0, wsText, ph[:20], true),
			frame(true, 0, wsText, ph[20:], true),
		}},
		{"placeholder in a ping", [][]byte{frame(true, 0, wsPing, ph, true)}},
		{"placeholder in a close", [][]byte{frame(true, 0, wsClose, closePayload(1000, tokenPH), true)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var srv *wsServer
			srv = newWSServer(func(_ string, _ bool, w *bufio.ReadWriter) { srv.record(w) })
			h, _ := secretHarness(t, srv)
			g := dialWS(t, h, "other.test", false)
			if g.res.StatusCode != 101 {
				t.Fatalf("upgrade: %d", g.res.StatusCode)
			}
			for _, f := range tc.frames {
				g.send(f)
			}
			_, _, closing := g.messages(false)
			if closing == nil || len(closing.payload) < 2 || binary.BigEndian.Uint16(closing.payload) != wsClosePolicyViolation {
				t.Fatalf("close frame %+v, want %d; read %q", closing, wsClosePolicyViolation, g.raw.Bytes())
			}
			<-srv.done
			got := srv.receivedPayload()
			if bytes.Contains(got, ph) || bytes.Contains(got, []byte(tokenValue)) {
				t.Errorf("the upstream received %q", got)
			}
			es := h.entriesAfter(1, func(e audit.Entry) bool { return e.Name == "other.test" && e.Decision == audit.DecisionDeny })
			var found bool
			for _, e := range es {
				if e.Name == "other.test" && e.Decision == audit.DecisionDeny && strings.Contains(e.Reason, `secret "token"`) && strings.Contains(e.Reason, "WebSocket") {
					found = true
					if e.Rule != "secret.token" || e.RuleLine != 20 {
						t.Errorf("entry names rule %s:%d", e.Rule, e.RuleLine)
					}
				}
			}
			if !found {
				t.Errorf("no audit entry refusing the frame: %+v", es)
			}
		})
	}
}

// TestWebSocketPlaceholderToOwnHostVerbatim: frames are not a place
// where secrets are substituted; a placeholder in a frame to the
// secret's own host goes as it is.
func TestWebSocketPlaceholderToOwnHostVerbatim(t *testing.T) {
	var srv *wsServer
	srv = newWSServer(func(_ string, _ bool, w *bufio.ReadWriter) { srv.record(w) })
	h, _ := secretHarness(t, srv)
	g := dialWS(t, h, "api.test", true)
	if g.res.StatusCode != 101 {
		t.Fatalf("upgrade: %d", g.res.StatusCode)
	}
	g.send(frame(true, 0, wsText, []byte("token "+tokenPH), true))
	g.send(frame(true, 0, wsClose, closePayload(1000, ""), true))
	msgs, _, closing := g.messages(false)
	if closing == nil || len(msgs) != 1 || string(msgs[0]) != "token "+tokenPH {
		t.Fatalf("messages %q close %v", msgs, closing)
	}
	<-srv.done
	if got := srv.receivedPayload(); !bytes.Contains(got, []byte("token "+tokenPH)) || bytes.Contains(got, []byte(tokenValue)) {
		t.Errorf("the upstream received %q", got)
	}
}

// TestNonWebSocketUpgradeRefused plays a guest asking a secret's host
// for other protocols than WebSocket after its credential was
// substituted, and an upstream that would switch to them and echo the
// credential on the raw stream.
func TestNonWebSocketUpgradeRefused(t *testing.T) {
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\nauth=%s\n", r.Header.Get("Upgrade"), r.Header.Get("Authorization"))
		brw.Flush()
	})
	for _, up := range []string{"foo", "h2c", "websocket, foo", "TLS/1.2"} {
		t.Run(up, func(t *testing.T) {
			// An HTTP/1.1-only upstream: over HTTP/2 the transport itself
			// would refuse to send the upgrade.
			pki := newUpstreamPKI(t)
			hits := make(chan string, 10)
			s := startUpstreamTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits <- r.Host
				upstream(w, r)
			}), false, "api.test")
			p := secretSpec(pki, "api.test", []policy.AllowRule{allow("api.test", 4)}, mapping("api.test", serverAddr(s)))
			h := newHarness(t, p, map[string][]byte{"token": []byte(tokenValue)}, map[string]string{"token": tokenPH})
			c, err := h.guestTLS("api.test", 443, "api.test", "http/1.1")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: api.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: %s\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nAuthorization: Bearer %s\r\n\r\n", up, tokenPH)
			br := bufio.NewReader(c)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode == http.StatusSwitchingProtocols {
				line, _ := br.ReadString('\n')
				t.Fatalf("the upstream switched to %s; the guest read %q", up, line)
			}
			body, _ := io.ReadAll(res.Body)
			if bytes.Contains(body, []byte(tokenValue)) {
				t.Fatalf("the guest read the value: %q", body)
			}
			if res.StatusCode != http.StatusForbidden {
				t.Fatalf("Upgrade: %s: %d, want 403", up, res.StatusCode)
			}
			select {
			case host := <-hits:
				t.Fatalf("upstream reached for %s", host)
			default:
			}
		})
	}
}

// TestWSUpRefusesBadFrames feeds the guest's side hostile framing: each
// must end the stream with a protocol error before anything of the
// offending frame goes upstream.
func TestWSUpRefusesBadFrames(t *testing.T) {
	long := bytes.Repeat([]byte("p"), 126)
	top := []byte{0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}
	cases := map[string][]byte{
		"unmasked":                frame(true, 0, wsText, []byte("x"), false),
		"reserved bit":            frame(true, 0x40, wsText, []byte("x"), true),
		"reserved opcode":         frame(true, 0, 0x3, []byte("x"), true),
		"reserved control opcode": frame(true, 0, 0xb, []byte("x"), true),
		"fragmented ping":         frame(false, 0, wsPing, []byte("x"), true),
		"long ping":               frame(true, 0, wsPing, long, true),
		"top length bit":          top,
		"lone continuation":       frame(true, 0, wsContinuation, []byte("x"), true),
		"message inside message":  append(frame(false, 0, wsText, []byte("x"), true), frame(true, 0, wsText, []byte("y"), true)...),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			u := &wsUp{host: "other.test"}
			u.init()
			var fwd []byte
			var err error
			for i := range in { // a byte at a time: the worst split
				if fwd, err = u.feed(fwd, in[i:i+1]); err != nil {
					break
				}
			}
			var we *wsError
			if !errors.As(err, &we) || we.code != wsCloseProtocolError {
				t.Fatalf("err %v, want a protocol error", err)
			}
			if name == "message inside message" {
				if first := frame(false, 0, wsText, []byte("x"), true); !bytes.Equal(fwd, first) {
					t.Errorf("forwarded %x, want only the first frame", fwd)
				}
			} else if len(fwd) != 0 {
				t.Errorf("forwarded %x", fwd)
			}
		})
	}
}

// TestWSDownRefusesBadFrames: the upstream's side is held to the same
// framing rules, and to not masking its frames.
func TestWSDownRefusesBadFrames(t *testing.T) {
	cases := map[string][]byte{
		"masked":            frame(true, 0, wsText, []byte("x"), true),
		"reserved bit":      frame(true, 0x20, wsBinary, []byte("x"), false),
		"lone continuation": frame(true, 0, wsContinuation, []byte("x"), false),
		"one-byte close":    frame(true, 0, wsClose, []byte("x"), false),
	}
	for name, in := range cases {
		d := newWSDown(newReplacer([][2]string{{tokenValue, tokenPH}}))
		out, err := d.feed(nil, in)
		var we *wsError
		if !errors.As(err, &we) || we.code != wsCloseProtocolError || len(out) != 0 {
			t.Errorf("%s: out %x err %v, want a protocol error and nothing out", name, out, err)
		}
	}
}

// TestWSDownMessagesEndingLikeAValue: messages that end with what could
// start a value, followed by ones that do not continue it, go out
// unchanged and at once; the value whole in a later message is masked.
func TestWSDownMessagesEndingLikeAValue(t *testing.T) {
	d := newWSDown(newReplacer([][2]string{{tokenValue, tokenPH}}))
	for _, m := range []string{"a real", "-", "token-x", "", "r", "real-token-0123456789abcdeX", "r", tokenValue} {
		out, err := d.feed(nil, frame(true, 0, wsText, []byte(m), false))
		if err != nil {
			t.Fatalf("message %q: %v", m, err)
		}
		fs := parseTestFrames(out, false)
		want := strings.ReplaceAll(m, tokenValue, tokenPH)
		if len(fs) != 1 || !fs[0].fin || string(fs[0].payload) != want {
			t.Fatalf("message %q came out as %+v, want %q at once", m, fs, want)
		}
	}
}

// parseTestFrames parses b into frames while it holds whole ones, and
// with partial the frame b ends inside, with the payload it has.
func parseTestFrames(b []byte, partial bool) []testFrame {
	r := bytes.NewReader(b)
	var fs []testFrame
	for {
		f, err := readTestFrame(r)
		if err != nil {
			if partial && errors.Is(err, io.ErrUnexpectedEOF) && f.payload != nil {
				fs = append(fs, f)
			}
			return fs
		}
		fs = append(fs, f)
	}
}

// joinMessages returns the complete data messages of fs, and the control
// frames' payloads.
func joinMessages(fs []testFrame) (msgs, controls []string) {
	var cur []byte
	for _, f := range fs {
		if f.op >= wsClose {
			controls = append(controls, string(f.payload))
			continue
		}
		cur = append(cur, f.payload...)
		if f.fin {
			msgs = append(msgs, string(cur))
			cur = nil
		}
	}
	return msgs, controls
}

// FuzzWSFrames feeds arbitrary bytes, in pieces of arbitrary size, to
// both directions' frame handling. Downstream, whatever the upstream
// sends, what the guest gets must be well-formed frames, and each
// complete message must be the input's message masked exactly as
// strings would be, and the value must not be in the data payload, not
// even across messages. Upstream, what is
// forwarded is always a prefix of the guest's bytes, and never carries
// the placeholder or value whole.
func FuzzWSFrames(f *testing.F) {
	a := []byte("Bearer " + tokenValue)
	f.Add(frame(true, 0, wsText, a, false), uint8(1))
	f.Add(append(frame(false, 0, wsText, a[:12], false), append(frame(true, 0, wsPing, []byte("p"), false), frame(true, 0, wsContinuation, a[12:], false)...)...), uint8(3))
	f.Add(append(frame(true, 0, wsBinary, []byte(tokenValue[:5]), false), frame(true, 0, wsBinary, []byte(tokenValue[5:]), false)...), uint8(7))
	f.Add(frame(true, 0, wsClose, closePayload(1000, tokenValue), false), uint8(0))
	f.Add(frame(true, 0, wsText, []byte(tokenPH), true), uint8(2))
	f.Add(append(frame(false, 0, wsText, []byte(tokenPH[:9]), true), frame(true, 0, wsContinuation, []byte(tokenPH[9:]), true)...), uint8(5))
	f.Add(frame(true, 0, wsBinary, bytes.Repeat([]byte("x"), 300), false), uint8(200))
	f.Add([]byte{0x81, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0}, uint8(1))
	f.Add(append(frame(true, 0, wsText, []byte("x r"), false), frame(true, 0, wsText, []byte("eal"), false)...), uint8(4))
	f.Add(append(frame(true, 0, wsText, []byte("q "+tokenValue[:14]), false), frame(true, 0, wsText, []byte(tokenValue[3:20]+" x"), false)...), uint8(6))
	mask := newMasker([][2]string{{tokenValue, tokenPH}}, [][2]string{{tokenValue, tokenPH}})
	deny := &secret{value: []byte(tokenValue), placeholder: tokenPH}
	deny.Name = "token"
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		size := int(step%32) + 1
		// Downstream.
		d := newWSDown(mask)
		var out []byte
		var derr error
		for i := 0; i < len(in) && derr == nil; i += size {
			out, derr = d.feed(out, in[i:min(i+size, len(in))])
		}
		got := parseTestFrames(out, false)
		var n int
		for _, fr := range got {
			n += len(frame(fr.fin, 0, fr.op, fr.payload, false))
			if fr.rsv != 0 || fr.op >= wsClose && (!fr.fin || len(fr.payload) > wsMaxControl) {
				t.Fatalf("bad frame out: %+v", fr)
			}
		}
		if n != len(out) {
			t.Fatalf("output is not whole frames: %d of %d bytes parse", n, len(out))
		}
		gotMsgs, _ := joinMessages(got)
		inMsgs, _ := joinMessages(parseTestFrames(in, false))
		for i, m := range gotMsgs {
			if i < len(inMsgs) && m != mask.replaceString(inMsgs[i]) {
				t.Fatalf("message %d out %q, in %q", i, m, inMsgs[i])
			}
		}
		var stream []byte
		for _, fr := range got {
			if fr.op < wsClose {
				stream = append(stream, fr.payload...)
			}
		}
		if bytes.Contains(stream, []byte(tokenValue)) {
			t.Fatalf("the data the guest got holds the value: %q", stream)
		}
		// Upstream.
		u := &wsUp{host: "other.test", secrets: []*secret{deny}}
		u.init()
		var fwd []byte
		var uerr error
		for i := 0; i < len(in) && uerr == nil; i += size {
			fwd, uerr = u.feed(fwd, in[i:min(i+size, len(in))])
		}
		if !bytes.HasPrefix(in, fwd) {
			t.Fatalf("forwarded bytes are not the guest's")
		}
		var data []byte
		for _, fr := range parseTestFrames(fwd, true) {
			if fr.op < wsClose {
				data = append(data, fr.payload...)
			} else if bytes.Contains(fr.payload, []byte(tokenPH)) || bytes.Contains(fr.payload, []byte(tokenValue)) {
				t.Fatalf("a control frame forwarded with a denied string")
			}
		}
		// The frame being forwarded when the stream stopped is cut short;
		// its payload so far counts too.
		if bytes.Contains(data, []byte(tokenPH)) || bytes.Contains(data, []byte(tokenValue)) {
			t.Fatalf("forwarded data carries a denied string: %q", data)
		}
	})
}

// TestH2ExtendedConnectRefused plays a guest that opens a WebSocket over
// HTTP/2 (RFC 8441's extended CONNECT, with :protocol) to a secret's
// host with the placeholder: whether or not the server advertises
// extended CONNECT (GODEBUG=http2xconnect=1 makes it), the stream is
// refused and the upstream never reached.
func TestH2ExtendedConnectRefused(t *testing.T) {
	srv := newWSServer(func(auth string, _ bool, w *bufio.ReadWriter) {
		w.Write(frame(true, 0, wsText, []byte(auth), false))
	})
	pki := newUpstreamPKI(t)
	hits := make(chan string, 10)
	up := upstreamTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- r.Method + " " + r.Host
		srv.ServeHTTP(w, r)
	}), "a.test")
	p := secretSpec(pki, "a.test", []policy.AllowRule{allow("a.test", 4)}, mapping("a.test", serverAddr(up)))
	h := newHarness(t, p, map[string][]byte{"token": []byte(tokenValue)}, map[string]string{"token": tokenPH})
	code := h2Request(t, h, [][2]string{{":method", "CONNECT"}, {":protocol", "websocket"}, {":scheme", "https"},
		{":authority", "a.test"}, {":path", "/ws"}, {"sec-websocket-version", "13"}, {"authorization", "Bearer " + tokenPH}})
	t.Logf("extended CONNECT: status %d (0: the stream was reset)", code)
	if code >= 200 && code < 300 {
		t.Fatalf("extended CONNECT answered %d", code)
	}
	select {
	case hit := <-hits:
		t.Fatalf("upstream reached: %s", hit)
	default:
	}
}

// TestWSMemoryBounded streams a frame that claims 2^40 bytes through
// both directions: nothing is buffered beyond a read and the longest
// value, and the bytes pass as they come.
func TestWSMemoryBounded(t *testing.T) {
	chunk := bytes.Repeat([]byte("0123456789abcdef"), wsReadSize/16)
	for _, fromClient := range []bool{false, true} {
		hdr := []byte{0x82, 127, 0, 0, 1, 0, 0, 0, 0, 0}
		if fromClient {
			hdr[1] |= 0x80
			hdr = append(hdr, 1, 2, 3, 4)
		}
		d := newWSDown(newReplacer([][2]string{{tokenValue, tokenPH}}))
		u := &wsUp{host: "other.test", secrets: []*secret{{value: []byte(tokenValue), placeholder: tokenPH}}}
		u.init()
		var in, out int
		feed := func(p []byte) {
			var got []byte
			var err error
			if fromClient {
				got, err = u.feed(nil, p)
			} else {
				got, err = d.feed(nil, p)
			}
			if err != nil {
				t.Fatal(err)
			}
			in, out = in+len(p), out+len(got)
			if bufs := cap(d.buf) + cap(d.held) + cap(d.tmp) + cap(u.buf) + cap(u.tmp) + cap(u.window); bufs > 4*wsReadSize {
				t.Fatalf("after %d bytes in: %d bytes buffered", in, bufs)
			}
		}
		feed(hdr)
		for range 200 {
			feed(chunk)
		}
		if fromClient && out != in || !fromClient && out < in-len(hdr)-len(tokenValue) {
			t.Errorf("client=%v: %d bytes in, %d out", fromClient, in, out)
		}
	}
}

// TestWebSocketPartialEchoMasked plays an upstream that quotes the first
// and last 20 bytes of the credential in a text frame, and again in two
// fragments split inside the first quote: each quote is a run of the
// value and reaches the guest as the placeholder.
func TestWebSocketPartialEchoMasked(t *testing.T) {
	srv := newWSServer(func(auth string, _ bool, w *bufio.ReadWriter) {
		v := strings.TrimPrefix(auth, "Bearer ")
		q := "first=" + v[:20] + " last=" + v[len(v)-20:]
		w.Write(frame(true, 0, wsText, []byte(q), false))
		w.Write(frame(false, 0, wsText, []byte(q[:15]), false))
		w.Write(frame(true, 0, wsContinuation, []byte(q[15:]), false))
		w.Write(frame(true, 0, wsClose, closePayload(1000, "bye"), false))
	})
	h, _ := secretHarness(t, srv)
	g := dialWS(t, h, "api.test", true)
	if g.res.StatusCode != 101 {
		t.Fatalf("upgrade: %d", g.res.StatusCode)
	}
	msgs, _, _ := g.messages(false)
	want := "first=" + tokenPH + " last=" + tokenPH
	if len(msgs) != 2 || string(msgs[0]) != want || string(msgs[1]) != want {
		t.Errorf("messages %q, want %q twice", msgs, want)
	}
	if run := valueRun(string(bytes.Join(msgs, nil)), tokenValue, runLen); run != "" {
		t.Errorf("the guest got %q of the value: %q", run, msgs)
	}
}
