package sandboxnet_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/policy"
)

func TestMain(m *testing.M) {
	code := m.Run()
	machinetest.Cleanup()
	os.Exit(code)
}

// upstreamCA makes a CA and a server certificate it signs for names, as
// an upstream the host must verify with a CA the spec adds.
func upstreamCA(t *testing.T, names ...string) (caPEM []byte, cert tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "upstream test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &leafKey.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}
}

// upstream is the servers the sandbox reaches: every name is mapped to
// it. It records the Authorization headers it got.
type upstream struct {
	mu    sync.Mutex
	auths []string
	// sawFirst is closed by the test once the guest printed the first
	// event of /sse, which sends its second only then.
	sawFirst chan struct{}
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/sse":
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-u.sawFirst:
			io.WriteString(w, "data: two\n\n")
		case <-time.After(2 * time.Minute):
			io.WriteString(w, "data: the first event never reached the guest\n\n")
		}
		return
	case "/ws":
		u.websocket(w, r)
		return
	}
	u.mu.Lock()
	u.auths = append(u.auths, r.Header.Get("Authorization"))
	u.mu.Unlock()
	// An upstream that echoes what it got, as some error pages do.
	w.Header().Set("X-Echo", r.Header.Get("Authorization"))
	fmt.Fprintf(w, "host=%s auth=%s\n", r.Host, r.Header.Get("Authorization"))
}

// websocket answers a WebSocket upgrade and echoes one text frame in
// upper case.
func (u *upstream) websocket(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		http.Error(w, "not an upgrade", http.StatusBadRequest)
		return
	}
	sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
		base64.StdEncoding.EncodeToString(sum[:]))
	brw.Flush()
	hdr := make([]byte, 2)
	if _, err := io.ReadFull(brw, hdr); err != nil {
		return
	}
	n := int(hdr[1] & 0x7f)
	mask := make([]byte, 4)
	io.ReadFull(brw, mask)
	payload := make([]byte, n)
	io.ReadFull(brw, payload)
	for i := range payload {
		payload[i] ^= mask[i%4]
	}
	brw.Write(append([]byte{0x81, byte(n)}, bytes.ToUpper(payload)...))
	brw.Flush()
}

func (u *upstream) sawAuth(s string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, a := range u.auths {
		if a == s {
			return true
		}
	}
	return false
}

// TestSandboxNetwork boots a sandbox whose network is the egress engine
// and checks from inside the guest — as its user, and as root for the
// hostile cases — that allowed hosts work over HTTP/1.1 and HTTP/2 with
// the brokered secret substituted, that the real value never reaches
// the guest, and that everything else is refused and audited; then that
// a reload changes what is reachable and rotates the secret at once.
func TestSandboxNetwork(t *testing.T) {
	_, _, img := machinetest.Require(t)
	const secret = "sk-real-value-0123456789abcdef"
	const rotated = "sk-rotated-value-fedcba9876543210"
	caPEM, cert := upstreamCA(t, "api.test", "other.test", "late.test")
	up := &upstream{sawFirst: make(chan struct{})}
	addr := tlsUpstream(t, cert, true, up)

	pol := policy.Sandbox{
		Allow: []policy.AllowRule{{Pattern: policy.MustHostPattern("api.test")}, {Pattern: policy.MustHostPattern("other.test")}},
		Hosts: []policy.HostMapping{{Name: "api.test", Addr: addr}, {Name: "other.test", Addr: addr}, {Name: "late.test", Addr: addr}},
		Secrets: []policy.SecretBinding{{Name: "token", Env: "TOKEN", Hosts: []policy.HostPattern{policy.MustHostPattern("api.test")},
			Source: "env:TOKEN_VALUE", Origin: policy.Origin{Block: "secret.token", File: "sbx.hcl", Line: 7}}},
		CAs: []policy.CA{{Path: "upstream.pem", PEM: string(caPEM)}},
	}
	sb := bootVM(t, img, "net", 5*time.Minute, pol, map[string][]byte{"token": []byte(secret)})
	m, n, ctx, auditDir := sb.m, sb.n, sb.ctx, sb.auditDir

	sb.install(t, "guestclient", "/bin/gc")
	run := func(user string, args ...string) string {
		t.Helper()
		out, st, err := sb.exec(90*time.Second, user, args...)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if st.Code != 0 {
			t.Logf("%q exited %d", args, st.Code)
		}
		return out
	}
	placeholder, ok := n.Placeholder("token")
	if !ok || strings.Contains(placeholder, secret) {
		t.Fatalf("placeholder %q", placeholder)
	}

	// The guest's environment carries the placeholder, never the value.
	env := run("agent", "env")
	if !strings.Contains(env, "TOKEN="+placeholder) || strings.Contains(env, secret) {
		t.Errorf("the guest's environment:\n%s\nwant TOKEN=%s and no real value", env, placeholder)
	}

	// HTTP/2 and HTTP/1.1 to the secret's host: the upstream gets the
	// real value, the guest sees the placeholder in the echo.
	for _, args := range [][]string{{"gc", "get", "-bearer", "TOKEN", "https://api.test/v1"}, {"gc", "get", "-h1", "-bearer", "TOKEN", "https://api.test/v1"}} {
		out := run("agent", args...)
		wantProto := "HTTP/2.0"
		if args[2] == "-h1" {
			wantProto = "HTTP/1.1"
		}
		if !strings.Contains(out, "status 200 "+wantProto) {
			t.Errorf("%q: %s; want 200 over %s", args, out, wantProto)
		}
		if strings.Contains(out, secret) || !strings.Contains(out, "auth=Bearer "+placeholder) {
			t.Errorf("%q: %s; want the echo masked back to the placeholder", args, out)
		}
	}
	if !up.sawAuth("Bearer " + secret) {
		t.Error("the upstream never got the real value")
	}

	// Basic auth with the placeholder as the password, as git's
	// credential helpers send it.
	if out := run("agent", "gc", "get", "-h1", "-basic", "git:TOKEN", "https://api.test/repo"); !strings.Contains(out, "status 200") || strings.Contains(out, secret) {
		t.Errorf("basic auth: %s", out)
	}
	if !up.sawAuth("Basic " + base64.StdEncoding.EncodeToString([]byte("git:"+secret))) {
		t.Error("the upstream did not get the real value inside the Basic credential")
	}
	// A WebSocket echo through the engine.
	if out := run("agent", "gc", "ws", "https://api.test/ws", "hello"); !strings.Contains(out, "ws HELLO") {
		t.Errorf("websocket: %s", out)
	}
	// An event stream arrives event by event: the upstream sends its
	// second event only once the guest has printed the first.
	sseOut := &watchWriter{want: "data: one", seen: up.sawFirst}
	st, err := m.Exec(ctx, guestconn.Cmd{Args: []string{"gc", "sse", "https://api.test/sse"}, User: "agent", Stdout: sseOut, Stderr: sseOut})
	if err != nil || st.Code != 0 || !strings.Contains(sseOut.String(), "data: two") {
		t.Errorf("event stream: %v, %v:\n%s", st, err, sseOut.String())
	}

	// The placeholder to an allowed host that is not the secret's.
	if out := run("agent", "gc", "get", "-bearer", "TOKEN", "https://other.test/"); !strings.Contains(out, "status 403") || strings.Contains(out, secret) {
		t.Errorf("placeholder to other.test: %s; want 403", out)
	}
	if up.sawAuth("Bearer "+placeholder) || countAuth(up, "Bearer "+secret) != 2 {
		t.Error("a placeholder or the value reached an upstream it is not for")
	}
	// Domain fronting: TLS to api.test, Host other.test.
	if out := run("root", "gc", "get", "-h1", "-host", "other.test", "https://api.test/"); strings.Contains(out, "status 200") {
		entries, _ := audit.Tail(auditDir, 1000)
		for _, e := range entries {
			t.Log(audit.Format(e))
		}
		t.Errorf("domain fronting: %s; want it refused", out)
	}
	// Names the policy does not allow do not resolve; raw addresses,
	// the metadata service and outside resolvers are unreachable.
	for _, c := range []struct {
		args []string
		bad  string
	}{
		{[]string{"gc", "get", "https://denied.test/"}, "status"},
		{[]string{"gc", "dial", "169.254.169.254:80"}, "connected"},
		{[]string{"gc", "dial", "127.0.0.1:22"}, "connected"},
		{[]string{"gc", "dial", "10.83.0.1:80"}, "connected"},
		{[]string{"gc", "dial", "api.test:22"}, "connected"},
		{[]string{"gc", "udp", "8.8.8.8:53"}, "answered"},
	} {
		if out := run("root", c.args...); strings.Contains(out, c.bad) || !strings.Contains(out, "error") {
			t.Errorf("%q as root: %s; want it refused", c.args, out)
		}
	}
	// Not a hosts-mapped name until the policy allows it.
	if out := run("agent", "gc", "get", "https://late.test/"); strings.Contains(out, "status 200") {
		t.Errorf("late.test before the reload: %s", out)
	}

	// Reload: late.test allowed, the secret rotated; the guest's
	// placeholder stays.
	pol2 := pol
	pol2.Allow = append([]policy.AllowRule{{Pattern: policy.MustHostPattern("late.test")}}, pol.Allow...)
	if again, err := n.Update(pol2, map[string][]byte{"token": []byte(rotated)}); err != nil || again {
		t.Fatalf("Update = %v, %v; want no reconfiguration", again, err)
	}
	if out := run("agent", "gc", "get", "https://late.test/"); !strings.Contains(out, "status 200") {
		t.Errorf("late.test after the reload: %s; want 200", out)
	}
	if out := run("agent", "gc", "get", "-bearer", "TOKEN", "https://api.test/"); !strings.Contains(out, "status 200") || strings.Contains(out, rotated) {
		t.Errorf("after rotation: %s", out)
	}
	if !up.sawAuth("Bearer " + rotated) {
		t.Error("the rotated value did not reach the upstream")
	}
	if again, err := n.Update(pol, map[string][]byte{"token": []byte(rotated)}); err != nil || again {
		t.Fatalf("Update = %v, %v", again, err)
	}
	if out := run("agent", "gc", "get", "https://late.test/"); strings.Contains(out, "status 200") {
		t.Errorf("late.test after it was removed: %s; want it refused", out)
	}

	// Everything refused is in the audit log, with a reason.
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries, err := audit.Tail(auditDir, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for _, e := range entries {
			text.WriteString(audit.Format(e) + "\n")
		}
		s := text.String()
		missing := ""
		for _, want := range []string{"169.254.169.254", "8.8.8.8", "denied.test", "other.test", "allow https api.test:443"} {
			if !strings.Contains(s, want) {
				missing = want
			}
		}
		if strings.Contains(s, secret) || strings.Contains(s, rotated) {
			t.Fatalf("the audit log holds a secret's value:\n%s", s)
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit log lacks %q:\n%s", missing, s)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if b := m.Console(); bytes.Contains(b, []byte(secret)) {
		t.Error("the console holds the secret's value")
	}
}

// watchWriter collects output and closes seen once want appears in it.
type watchWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func countAuth(u *upstream, s string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, a := range u.auths {
		if a == s {
			n++
		}
	}
	return n
}
