package sandboxnet_test

import (
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/policy"
)

// wsUpstream is a hostile WebSocket server behind the secret's host and
// another allowed host: /echo sends the Authorization header it got back
// in frames (split across fragments around a ping, whole, and as the
// close reason), /sink records what the guest sends, /raw switches to
// whatever protocol was asked and writes the header on the raw stream.
type wsUpstream struct {
	mu       sync.Mutex
	received []byte
	raw      int
	sinkDone chan struct{}
}

func (u *wsUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	if r.URL.Path == "/raw" {
		u.mu.Lock()
		u.raw++
		u.mu.Unlock()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\nauth=%s\n", r.Header.Get("Upgrade"), auth)
		brw.Flush()
		return
	}
	sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n",
		base64.StdEncoding.EncodeToString(sum[:]))
	if r.Header.Get("Sec-WebSocket-Extensions") != "" {
		// It was offered: accept it, as a server that compresses would
		// (the engine must never let the offer through).
		brw.WriteString("Sec-WebSocket-Extensions: permessage-deflate\r\n")
	}
	brw.WriteString("\r\n")
	serverFrame := func(fin bool, op byte, p string) {
		b0 := op
		if fin {
			b0 |= 0x80
		}
		brw.Write(append([]byte{b0, byte(len(p))}, p...))
	}
	switch r.URL.Path {
	case "/echo":
		serverFrame(false, 0x1, "auth: "+auth[:18])
		serverFrame(true, 0x9, "ping")
		serverFrame(true, 0x0, auth[18:])
		serverFrame(true, 0x2, auth)
		serverFrame(true, 0x8, "\x03\xe8"+auth)
		brw.Flush()
		io.Copy(io.Discard, brw)
	case "/sink":
		defer close(u.sinkDone)
		brw.Flush()
		for {
			var h [2]byte
			if _, err := io.ReadFull(brw, h[:]); err != nil {
				return
			}
			var key [4]byte
			if _, err := io.ReadFull(brw, key[:]); err != nil {
				return
			}
			p := make([]byte, h[1]&0x7f)
			n, _ := io.ReadFull(brw, p)
			for i := range p[:n] {
				p[i] ^= key[i%4]
			}
			u.mu.Lock()
			u.received = append(u.received, p[:n]...)
			u.mu.Unlock()
		}
	}
}

// TestWebSocketSecretsInVM boots a sandbox with a secret bound to
// api.test and plays, from inside the guest, the attacks on upgraded
// streams: the secret's host echoes the substituted header in WebSocket
// frames (split across fragments around a ping, whole, in the close
// reason) while the guest offers permessage-deflate; the guest sends its
// placeholder, split across two fragments, to other.test (allowed, not
// the secret's host); and the guest asks the secret's host for a
// protocol other than WebSocket with its credential.
func TestWebSocketSecretsInVM(t *testing.T) {
	_, _, img := machinetest.Require(t)
	const secret = "sk-real-value-0123456789abcdef"
	caPEM, cert := upstreamCA(t, "api.test", "other.test")
	up := &wsUpstream{sinkDone: make(chan struct{})}
	addr := tlsUpstream(t, cert, false, up)

	pol := policy.Sandbox{
		Allow: []policy.AllowRule{{Pattern: policy.MustHostPattern("api.test")}, {Pattern: policy.MustHostPattern("other.test")}},
		Hosts: []policy.HostMapping{{Name: "api.test", Addr: addr}, {Name: "other.test", Addr: addr}},
		Secrets: []policy.SecretBinding{{Name: "token", Env: "TOKEN", Hosts: []policy.HostPattern{policy.MustHostPattern("api.test")},
			Source: "env:TOKEN_VALUE", Origin: policy.Origin{Block: "secret.token", File: "sbx.hcl", Line: 7}}},
		CAs: []policy.CA{{Path: "upstream.pem", PEM: string(caPEM)}},
	}
	sb := bootVM(t, img, "ws", 5*time.Minute, pol, map[string][]byte{"token": []byte(secret)})
	n, auditDir := sb.n, sb.auditDir
	sb.install(t, "wsguest", "/bin/wsguest")
	run := func(user string, args ...string) string {
		t.Helper()
		out, st, err := sb.exec(90*time.Second, user, args...)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if st.Code != 0 {
			t.Errorf("%q exited %d: %s", args, st.Code, out)
		}
		return out
	}
	placeholder, ok := n.Placeholder("token")
	if !ok {
		t.Fatal("no placeholder")
	}

	// The echo, as the sandbox's user and as root.
	for _, user := range []string{"agent", "root"} {
		out := run(user, "wsguest", "read", "https://api.test/echo")
		if strings.Contains(out, secret) || !strings.HasPrefix(out, "read ") {
			t.Errorf("as %s, the guest read: %s", user, out)
		}
		if c := strings.Count(out, placeholder); c != 3 {
			t.Errorf("as %s, the placeholder is in %d places, want 3 (fragments, frame, close): %s", user, c, out)
		}
	}

	// The placeholder in frames to other.test.
	out := run("root", "wsguest", "send", "https://other.test/sink")
	if !strings.HasPrefix(out, "close 1008 ") {
		t.Errorf("sending the placeholder to other.test: %s; want close 1008", out)
	}
	select {
	case <-up.sinkDone:
	case <-time.After(time.Minute):
		t.Fatal("the upstream's connection was never closed")
	}
	up.mu.Lock()
	got := append([]byte(nil), up.received...)
	up.mu.Unlock()
	if bytes.Contains(got, []byte(placeholder)) || bytes.Contains(got, []byte(secret)) {
		t.Errorf("other.test received %q", got)
	}

	// Other protocols after a substituted request.
	for _, proto := range []string{"h2c", "foo"} {
		out := run("agent", "wsguest", "upgrade", "https://api.test/raw", proto)
		if strings.Contains(out, secret) || !strings.HasPrefix(out, "status 403") {
			t.Errorf("upgrade to %s: %s; want 403", proto, out)
		}
	}
	up.mu.Lock()
	raw := up.raw
	up.mu.Unlock()
	if raw != 0 {
		t.Errorf("the upstream was asked to switch protocols %d times", raw)
	}

	es, err := audit.Tail(auditDir, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var refused bool
	for _, e := range es {
		if strings.Contains(audit.Format(e), secret) {
			t.Errorf("the audit log holds the value: %s", audit.Format(e))
		}
		if e.Name == "other.test" && e.Decision == audit.DecisionDeny && strings.Contains(e.Reason, "WebSocket frame") && e.Rule == "secret.token" {
			refused = true
		}
	}
	if !refused {
		for _, e := range es {
			t.Log(audit.Format(e))
		}
		t.Error("no audit entry for the refused frame")
	}
}
