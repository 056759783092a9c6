package egress

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/policy"
)

// TestStreamingNotBuffered checks that an SSE event and a chunk arrive at
// the guest while the upstream still holds the rest of the response, over
// h1 and h2, with and without secrets (masking holds nothing back that
// cannot start a value).
func TestStreamingNotBuffered(t *testing.T) {
	for _, withSecret := range []bool{false, true} {
		release := make(chan struct{})
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/sse" {
				w.Header().Set("Content-Type", "text/event-stream")
			}
			w.WriteHeader(200)
			fmt.Fprintf(w, "data: first\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Second):
			}
			fmt.Fprintf(w, "data: second\n\n")
		})
		var h *harness
		if withSecret {
			h, _ = secretHarness(t, handler)
		} else {
			pki := newUpstreamPKI(t)
			up := upstreamTLS(t, pki, handler, "api.test")
			h = newHarness(t, spec(pki, []policy.AllowRule{allow("api.test", 4)}, mapping("api.test", serverAddr(up))), nil, nil)
		}
		for _, h2 := range []bool{false, true} {
			for _, path := range []string{"/sse", "/chunked"} {
				name := fmt.Sprintf("secret=%v h2=%v %s", withSecret, h2, path)
				res, err := h.client(h2).Get("https://api.test" + path)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				br := bufio.NewReader(res.Body)
				got := make(chan string, 1)
				go func() {
					line, _ := br.ReadString('\n')
					got <- line
				}()
				select {
				case line := <-got:
					if line != "data: first\n" {
						t.Errorf("%s: first line %q", name, line)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%s: the first event did not arrive before the stream ended", name)
				}
				release <- struct{}{}
				rest, _ := io.ReadAll(br)
				res.Body.Close()
				if string(rest) != "\ndata: second\n\n" {
					t.Errorf("%s: rest %q", name, rest)
				}
			}
		}
	}
}

const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

func wsAccept(key string) string {
	sum := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// wsRead reads one frame's payload (unmasking it if masked).
func wsRead(r io.Reader) (byte, []byte, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(hdr[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 1<<20 {
		return 0, nil, errors.New("frame too large")
	}
	var mask [4]byte
	masked := hdr[1]&0x80 != 0
	if masked {
		if _, err := io.ReadFull(r, mask[:]); err != nil {
			return 0, nil, err
		}
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	if masked {
		for i := range p {
			p[i] ^= mask[i%4]
		}
	}
	return hdr[0] & 0x0f, p, nil
}

// wsWrite writes one final text frame, masked as clients must.
func wsWrite(w io.Writer, p []byte, masked bool) error {
	if len(p) > 125 {
		return errors.New("test frames are short")
	}
	b := []byte{0x81, byte(len(p))}
	if masked {
		b[1] |= 0x80
		key := [4]byte{1, 2, 3, 4}
		b = append(b, key[:]...)
		for i, c := range p {
			b = append(b, c^key[i%4])
		}
	} else {
		b = append(b, p...)
	}
	_, err := w.Write(b)
	return err
}

// wsEcho is a WebSocket server: it first says whether the upgrade request
// carried the real credential, then echoes frames.
func wsEcho(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		http.Error(w, "not a websocket", 400)
		return
	}
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", wsAccept(r.Header.Get("Sec-WebSocket-Key")))
	hello := "auth-bad"
	if r.Header.Get("Authorization") == "Bearer "+tokenValue {
		hello = "auth-ok"
	}
	wsWrite(brw, []byte(hello), false)
	brw.Flush()
	for i := 0; i < 100; i++ {
		_, p, err := wsRead(brw)
		if err != nil {
			return
		}
		wsWrite(brw, p, false)
		brw.Flush()
	}
}

func TestWebSocketEcho(t *testing.T) {
	h, _ := secretHarness(t, http.HandlerFunc(wsEcho))
	c, err := h.guestTLS("api.test", 443, "api.test", "http/1.1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: api.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n", key, tokenPH)
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 101 || res.Header.Get("Sec-WebSocket-Accept") != wsAccept(key) {
		t.Fatalf("upgrade: %d %v", res.StatusCode, res.Header)
	}
	if _, p, err := wsRead(br); err != nil || string(p) != "auth-ok" {
		t.Fatalf("first frame %q %v: the placeholder was not substituted in the upgrade request", p, err)
	}
	for i := 0; i < 3; i++ {
		msg := fmt.Sprintf("message %d", i)
		if err := wsWrite(c, []byte(msg), true); err != nil {
			t.Fatal(err)
		}
		if _, p, err := wsRead(br); err != nil || string(p) != msg {
			t.Fatalf("echo %d: %q %v", i, p, err)
		}
	}
}

// TestWebSocketPlaceholderToOtherHost checks that an upgrade request is
// checked like any other.
func TestWebSocketPlaceholderToOtherHost(t *testing.T) {
	h, hits := secretHarness(t, http.HandlerFunc(wsEcho))
	c, err := h.guestTLS("other.test", 443, "other.test", "http/1.1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: other.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: x\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n", tokenPH)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 403 {
		t.Fatalf("upgrade with the placeholder to other.test: %d", res.StatusCode)
	}
	select {
	case host := <-hits:
		t.Fatalf("upstream reached for %s", host)
	default:
	}
}
