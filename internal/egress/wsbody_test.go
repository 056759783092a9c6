package egress

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/policy"
)

// wsSubstHarness is secretHarness with secret "token" substituted in
// the guest's WebSocket messages to api.test as ws says.
func wsSubstHarness(t *testing.T, srv *wsServer, ws *policy.WebSocketField) *harness {
	t.Helper()
	pki := newUpstreamPKI(t)
	up := upstreamTLS(t, pki, srv, "api.test", "other.test")
	p := secretSpec(pki, "api.test", []policy.AllowRule{allow("api.test", 4), allow("other.test", 5)},
		mapping("api.test", serverAddr(up)), mapping("other.test", serverAddr(up)))
	p.Secrets[0].WebSocket = ws
	return newHarness(t, p, map[string][]byte{"token": []byte(tokenValue)}, map[string]string{"token": tokenPH})
}

// TestWebSocketMessageSubstituted checks that a text message whose
// whole content is the placeholder (fragmented, with a ping between its
// fragments), or, with json_field, whose JSON string at that field is,
// reaches the upstream with the value, that other messages go on as
// they are, and that the upstream's echo comes back masked.
func TestWebSocketMessageSubstituted(t *testing.T) {
	ph := []byte(tokenPH)
	for _, c := range []struct {
		name    string
		ws      *policy.WebSocketField
		frames  [][]byte
		wantUp  []string
		wantMsg []string
	}{
		{"whole message", &policy.WebSocketField{}, [][]byte{
			frame(false, 0, wsText, ph[:10], true),
			frame(true, 0, wsPing, []byte("p"), true),
			frame(false, 0, wsContinuation, ph[10:20], true),
			frame(true, 0, wsContinuation, ph[20:], true),
			frame(true, 0, wsText, []byte("hello"), true),
			frame(true, 0, wsBinary, []byte{0, 1, 2}, true),
			frame(true, 0, wsText, nil, true),
		}, []string{tokenValue, "hello", "\x00\x01\x02", ""}, []string{tokenPH, "hello", "\x00\x01\x02", ""}},
		{"json field", &policy.WebSocketField{JSON: "auth.token"}, [][]byte{
			frame(true, 0, wsText, []byte(`{"type":"hello","auth":{"token":"`+tokenPH+`"}}`), true),
		}, []string{`{"type":"hello","auth":{"token":"` + tokenValue + `"}}`}, []string{`{"type":"hello","auth":{"token":"` + tokenPH + `"}}`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var srv *wsServer
			srv = newWSServer(func(_ string, _ bool, w *bufio.ReadWriter) { srv.record(w) })
			h := wsSubstHarness(t, srv, c.ws)
			g := dialWS(t, h, "api.test", false)
			if g.res.StatusCode != 101 {
				t.Fatalf("upgrade: %d", g.res.StatusCode)
			}
			for _, f := range c.frames {
				g.send(f)
			}
			g.send(frame(true, 0, wsClose, closePayload(1000, ""), true))
			msgs, _, closing := g.messages(false)
			if closing == nil {
				t.Fatalf("no close; read %q", g.raw.Bytes())
			}
			var got []string
			for _, m := range msgs {
				got = append(got, string(m))
			}
			if strings.Join(got, "|") != strings.Join(c.wantMsg, "|") {
				t.Errorf("the guest read %q, want %q", got, c.wantMsg)
			}
			<-srv.done
			srv.mu.Lock()
			var up []string
			for _, f := range srv.received {
				if f.op <= wsBinary {
					if !f.fin || f.op == wsContinuation {
						t.Errorf("the upstream got a fragment %+v; messages go on whole", f)
					}
					up = append(up, string(f.payload))
				}
			}
			srv.mu.Unlock()
			if strings.Join(up, "|") != strings.Join(c.wantUp, "|") {
				t.Errorf("the upstream got %q, want %q", up, c.wantUp)
			}
		})
	}
}

// TestWebSocketSubstitutionRefusals plays a guest putting the
// placeholder anywhere but where its websocket block says: the stream is
// closed (1008, or 1009 for a message too long to hold) and the upstream
// gets neither the placeholder nor the value.
func TestWebSocketSubstitutionRefusals(t *testing.T) {
	ph := []byte(tokenPH)
	whole, field := &policy.WebSocketField{}, &policy.WebSocketField{JSON: "token"}
	for _, c := range []struct {
		name   string
		ws     *policy.WebSocketField
		frames [][]byte
		code   uint16
	}{
		{"substring", whole, [][]byte{frame(true, 0, wsText, []byte("token "+tokenPH), true)}, wsClosePolicyViolation},
		{"substring across fragments", whole, [][]byte{
			frame(false, 0, wsText, ph, true), frame(true, 0, wsContinuation, []byte("x"), true)}, wsClosePolicyViolation},
		{"binary", whole, [][]byte{frame(true, 0, wsBinary, ph, true)}, wsClosePolicyViolation},
		{"ping", whole, [][]byte{frame(true, 0, wsPing, ph, true)}, wsClosePolicyViolation},
		{"close", whole, [][]byte{frame(true, 0, wsClose, closePayload(1000, tokenPH), true)}, wsClosePolicyViolation},
		{"json in whole mode", whole, [][]byte{frame(true, 0, wsText, []byte(`{"token":"`+tokenPH+`"}`), true)}, wsClosePolicyViolation},
		{"whole in json mode", field, [][]byte{frame(true, 0, wsText, ph, true)}, wsClosePolicyViolation},
		{"other json field", field, [][]byte{frame(true, 0, wsText, []byte(`{"token":"x","note":"`+tokenPH+`"}`), true)}, wsClosePolicyViolation},
		{"json substring", field, [][]byte{frame(true, 0, wsText, []byte(`{"token":"Bearer `+tokenPH+`"}`), true)}, wsClosePolicyViolation},
		{"json duplicate key", field, [][]byte{frame(true, 0, wsText, []byte(`{"token":"`+tokenPH+`","token":"x"}`), true)}, wsClosePolicyViolation},
		{"json escaped", field, [][]byte{frame(true, 0, wsText, []byte(fmt.Sprintf(`{"token":"\u%04x%s"}`, tokenPH[0], tokenPH[1:])), true)}, wsClosePolicyViolation},
		{"too long", whole, [][]byte{
			frame(false, 0, wsText, bytes.Repeat([]byte("a"), wsMaxMessage), true), frame(true, 0, wsContinuation, ph, true)}, wsCloseTooBig},
	} {
		t.Run(c.name, func(t *testing.T) {
			var srv *wsServer
			srv = newWSServer(func(_ string, _ bool, w *bufio.ReadWriter) { srv.record(w) })
			h := wsSubstHarness(t, srv, c.ws)
			g := dialWS(t, h, "api.test", false)
			if g.res.StatusCode != 101 {
				t.Fatalf("upgrade: %d", g.res.StatusCode)
			}
			for _, f := range c.frames {
				g.send(f)
			}
			_, _, closing := g.messages(false)
			if closing == nil || len(closing.payload) < 2 || binary.BigEndian.Uint16(closing.payload) != c.code {
				t.Fatalf("close frame %+v, want %d; read %q", closing, c.code, g.raw.Bytes())
			}
			<-srv.done
			if got := srv.receivedPayload(); bytes.Contains(got, ph) || bytes.Contains(got, []byte(tokenValue)) {
				t.Errorf("the upstream received %q", got)
			}
		})
	}
}
