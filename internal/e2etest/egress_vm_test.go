package e2etest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx"
	"github.com/sbx-dev/sbx/internal/build/debrepo"
	"github.com/sbx-dev/sbx/internal/egress/audit"
)

// egressSecret is the value the host brokers; the guest must never see
// it.
const egressSecret = "sk-egress-real-3f9c2a7d41b8e605"

// gitAuth is what git.test wants: the placeholder the guest's credential
// helper gives as password, replaced by the host.
var gitAuth = "Basic " + base64.StdEncoding.EncodeToString([]byte("x:"+egressSecret))

// egressUpstream is every HTTPS server the sandbox reaches, told apart
// by Host: api.test wants the real bearer token, git.test is git
// http-backend behind Basic auth with the real value as password,
// other.test and ro.test answer anything. It records every request.
type egressUpstream struct {
	git http.Handler
	// sawFirst is closed once the guest has printed the first event of
	// api.test/sse; the second is sent only then.
	sawFirst chan struct{}

	mu   sync.Mutex
	reqs []upstreamReq
}

type upstreamReq struct{ host, method, path, auth string }

func (u *egressUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	auth := r.Header.Get("Authorization")
	u.mu.Lock()
	u.reqs = append(u.reqs, upstreamReq{host, r.Method, r.URL.Path, auth})
	u.mu.Unlock()
	switch host {
	case "api.test":
		if r.URL.Path == "/sse" {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: one\n\n")
			http.NewResponseController(w).Flush()
			select {
			case <-u.sawFirst:
				io.WriteString(w, "data: two\n\n")
			case <-time.After(60 * time.Second):
				io.WriteString(w, "data: the first event never reached the guest\n\n")
			case <-r.Context().Done():
			}
			return
		}
		if auth != "Bearer "+egressSecret {
			http.Error(w, "api.test: wrong credential", http.StatusUnauthorized)
			return
		}
		// Echoed as some error pages do: the host must mask it.
		w.Header().Set("X-Echo", auth)
		fmt.Fprintf(w, "api.test: hello %s\n", r.URL.Path)
	case "git.test":
		if auth != gitAuth {
			w.Header().Set("WWW-Authenticate", `Basic realm="git.test"`)
			http.Error(w, "git.test: credentials needed", http.StatusUnauthorized)
			return
		}
		u.git.ServeHTTP(w, r)
	default:
		fmt.Fprintf(w, "%s %s %s\n", host, r.Method, r.URL.Path)
	}
}

// requests returns the recorded requests that match.
func (u *egressUpstream) requests(match func(upstreamReq) bool) []upstreamReq {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []upstreamReq
	for _, r := range u.reqs {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}

// testPKI makes a CA and a server certificate it signs for names: the
// upstream's, which the host verifies through the spec's ca entry.
func testPKI(t *testing.T, names ...string) (caPEM []byte, cert tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sbx egress test upstream CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(2 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(2 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &leafKey.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}
}

// hostGit runs git on the host with no user or system configuration.
func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=host", "GIT_AUTHOR_EMAIL=host@test.invalid", "GIT_COMMITTER_NAME=host", "GIT_COMMITTER_EMAIL=host@test.invalid"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// egressWatch collects a command's output and closes seen once want
// appears in it.
type egressWatch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *egressWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *egressWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestEgressInVM builds an image with Debian's curl and git, boots it
// through the Go API with an egress policy and a brokered secret, and
// drives the egress engine from inside the guest with those real
// clients: HTTP/2 and HTTP/1.1 with the secret substituted, an event
// stream arriving event by event, git clone and a push scoped to
// agent/* refs, and the refusals — unknown names, the metadata address,
// a forged address, domain fronting, the placeholder sent to another
// host, a push to main, a POST where only GET is allowed — each with an
// audit entry saying why. The real value never reaches the guest.
func TestEgressInVM(t *testing.T) {
	srcs, err := debrepo.HostSources("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) == 0 {
		t.Skip("the host has no apt sources")
	}
	const backend = "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("the host's git http-backend is needed: %v", err)
	}
	// The user's sbx CA is made on first use in the state directory:
	// this test's own.
	t.Setenv("XDG_STATE_HOME", t.TempDir())

	// The host's repository: a bare repository with one commit on main.
	gitRoot := t.TempDir()
	bare := filepath.Join(gitRoot, "repo.git")
	hostGit(t, gitRoot, "init", "-q", "--bare", "-b", "main", bare)
	hostGit(t, bare, "config", "http.receivepack", "true")
	seed := filepath.Join(gitRoot, "seed")
	hostGit(t, gitRoot, "init", "-q", "-b", "main", seed)
	if err := os.WriteFile(filepath.Join(seed, "README"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostGit(t, seed, "add", "README")
	hostGit(t, seed, "commit", "-q", "-m", "first")
	hostGit(t, seed, "push", "-q", bare, "main")
	mainBefore := hostGit(t, bare, "rev-parse", "main")

	caPEM, cert := testPKI(t, "api.test", "other.test", "git.test", "ro.test")
	up := &egressUpstream{
		git: &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + gitRoot, "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1", "HOME=" + gitRoot}},
		sawFirst: make(chan struct{}),
	}
	srv := httptest.NewUnstartedServer(up)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	// The configuration directory: the spec with the server's address,
	// its CA, and the kernel.
	cfgDir := t.TempDir()
	if err := os.Link(filepath.Join(dir, "kernel.deb"), filepath.Join(cfgDir, "kernel.deb")); err != nil {
		data, rerr := os.ReadFile(filepath.Join(dir, "kernel.deb"))
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err := os.WriteFile(filepath.Join(cfgDir, "kernel.deb"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmpl, err := os.ReadFile("testdata/egress/sbx.hcl")
	if err != nil {
		t.Fatal(err)
	}
	spec := strings.ReplaceAll(string(tmpl), "@UPSTREAM@", srv.Listener.Addr().String())
	// A narrowed rule is placed at its request block.
	pushLine, getLine := 0, 0
	for i, l := range strings.Split(spec, "\n") {
		switch strings.TrimSpace(l) {
		case `request "git.test" {`:
			pushLine = i + 1
		case `request "ro.test" {`:
			getLine = i + 1
		}
	}
	for name, data := range map[string]string{"sbx.hcl": spec, "upstream-ca.pem": string(caPEM)} {
		if err := os.WriteFile(filepath.Join(cfgDir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	cfg, err := sbx.Load(cfgDir, sbx.Options{Environ: environ})
	if err != nil {
		t.Fatal(err)
	}
	auditDir := t.TempDir()
	start := time.Now()
	sb, err := sbx.Start(ctx, cfg, "dev", sbx.StartOptions{
		Environ:  append(environ[:len(environ):len(environ)], "SBX_EGRESS_TEST_TOKEN="+egressSecret),
		AuditDir: auditDir,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop(context.Background())
	t.Logf("built and booted in %v", time.Since(start).Round(time.Second))

	// Everything the guest printed, searched for the real value at the
	// end.
	var guestOut strings.Builder
	run := func(user, script string) (string, int) {
		t.Helper()
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		st, err := sb.Exec(ctx, sbx.Cmd{Args: []string{"sh", "-c", script}, User: user, Stdout: &out, Stderr: &out})
		guestOut.WriteString(out.String())
		if err != nil {
			t.Fatalf("%q: %v\n%s", script, err, out.String())
		}
		return out.String(), st.Code
	}

	// The guest's variable holds a placeholder.
	placeholder, code := run("", `printf %s "$TOKEN"`)
	if code != 0 || !strings.HasPrefix(placeholder, "sbx_ph_token_") {
		t.Fatalf("$TOKEN in the guest: %d %q", code, placeholder)
	}

	// HTTP/2 and HTTP/1.1 with the bearer token: the upstream got the
	// real value (it answers 401 otherwise) and echoed it; the guest sees
	// the placeholder in the echo.
	for _, c := range []struct{ flag, version string }{{"--http2", "2"}, {"--http1.1", "1.1"}} {
		out, code := run("", `curl -sS -i --max-time 60 `+c.flag+` -H "Authorization: Bearer $TOKEN" -w 'version=%{http_version} status=%{http_code}\n' https://api.test/v1/models`)
		if code != 0 || !strings.Contains(out, "version="+c.version+" status=200") || !strings.Contains(out, "api.test: hello /v1/models") {
			t.Errorf("curl %s: exit %d\n%s", c.flag, code, out)
		}
		if !strings.Contains(strings.ToLower(out), "x-echo: bearer "+strings.ToLower(placeholder)) {
			t.Errorf("curl %s: the echoed credential is not masked to the placeholder:\n%s", c.flag, out)
		}
	}
	if n := len(up.requests(func(r upstreamReq) bool { return r.host == "api.test" && r.auth == "Bearer "+egressSecret })); n != 2 {
		t.Errorf("the upstream got the real bearer token %d times, want 2", n)
	}

	// An event stream arrives event by event: the second event is sent
	// only once the first has been printed in the guest.
	sse := &egressWatch{want: "data: one", seen: up.sawFirst}
	{
		ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		st, err := sb.Exec(ctx, sbx.Cmd{Args: []string{"curl", "-sS", "-N", "--max-time", "80", "https://api.test/sse"}, Stdout: sse, Stderr: sse})
		cancel()
		guestOut.WriteString(sse.String())
		if err != nil || st.Code != 0 || !strings.Contains(sse.String(), "data: two") {
			t.Errorf("curl -N of an event stream: %v, %v\n%s", st, err, sse.String())
		}
	}

	// Refusals, each as root: the guest is hostile.
	for _, c := range []struct {
		what, script string
		code         int
		max          time.Duration
	}{
		{"a name the policy does not allow", `curl -sS --max-time 60 https://denied.test/`, 6, 20 * time.Second},
		{"the metadata address", `curl -sS --max-time 60 http://169.254.169.254/latest/meta-data/`, 7, 20 * time.Second},
		{"an allowed name forced to another address", `curl -sS --max-time 60 --resolve api.test:443:1.2.3.4 https://api.test/`, 7, 20 * time.Second},
	} {
		t0 := time.Now()
		out, code := run("root", c.script)
		if took := time.Since(t0); code != c.code || took > c.max {
			t.Errorf("%s: curl exited %d after %v, want %d within %v\n%s", c.what, code, took.Round(time.Millisecond), c.code, c.max, out)
		}
	}
	// Domain fronting, over HTTP/2 (the Host header becomes :authority)
	// and HTTP/1.1; other.test itself is allowed.
	if out, code := run("", `curl -sS --max-time 60 -w 'status=%{http_code}\n' https://other.test/`); code != 0 || !strings.Contains(out, "status=200") {
		t.Errorf("other.test: exit %d\n%s", code, out)
	}
	for _, flag := range []string{"--http2", "--http1.1"} {
		out, _ := run("root", `curl -sS --max-time 60 `+flag+` -H 'Host: other.test' -w 'status=%{http_code}\n' https://api.test/`)
		if !strings.Contains(out, "status=403") || !strings.Contains(out, "fronting") {
			t.Errorf("Host: other.test on a connection to api.test (%s):\n%s", flag, out)
		}
	}
	// The placeholder to an allowed host that is not the secret's.
	if out, _ := run("root", `curl -sS --max-time 60 -H "Authorization: Bearer $TOKEN" -w 'status=%{http_code}\n' https://other.test/`); !strings.Contains(out, "status=403") || !strings.Contains(out, `secret "token"`) {
		t.Errorf("the placeholder to other.test:\n%s", out)
	}
	if got := up.requests(func(r upstreamReq) bool { return r.host == "other.test" }); len(got) != 1 || got[0].auth != "" {
		t.Errorf("other.test got %v; want only the one plain request", got)
	}

	// A method rule: ro.test takes GET only.
	if out, code := run("", `curl -sS --max-time 60 -w 'status=%{http_code}\n' https://ro.test/a`); code != 0 || !strings.Contains(out, "ro.test GET /a") {
		t.Errorf("GET ro.test: exit %d\n%s", code, out)
	}
	if out, _ := run("", `curl -sS --max-time 60 -X POST -d x -w 'status=%{http_code}\n' https://ro.test/a`); !strings.Contains(out, "status=403") || !strings.Contains(out, "only methods GET") {
		t.Errorf("POST ro.test:\n%s", out)
	}
	if got := up.requests(func(r upstreamReq) bool { return r.host == "ro.test" && r.method != "GET" }); len(got) != 0 {
		t.Errorf("ro.test got %v", got)
	}

	// git over HTTPS as the sandbox's user, the credential helper
	// handing git the placeholder as password.
	gitSetup := `set -e
export HOME=/tmp/agent-home GIT_TERMINAL_PROMPT=0
mkdir -p $HOME
git config --global credential.helper '!f(){ echo username=x; echo password=$TOKEN; }; f'
git config --global user.name agent
git config --global user.email agent@sandbox.invalid
`
	out, code := run("", gitSetup+`cd /tmp
git clone -q https://git.test/repo.git work
cd work
cat README
echo from the guest > README
git commit -qam second
git push -q origin HEAD:refs/heads/agent/x
git rev-parse HEAD`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) < 2 || lines[0] != "from the host" {
		t.Fatalf("git clone and push to agent/x: exit %d\n%s", code, out)
	}
	if got := hostGit(t, bare, "rev-parse", "refs/heads/agent/x"); got != lines[len(lines)-1] {
		t.Errorf("the host's agent/x is %s, the guest pushed %s", got, lines[len(lines)-1])
	}
	if n := len(up.requests(func(r upstreamReq) bool { return r.host == "git.test" && r.auth == gitAuth })); n == 0 {
		t.Error("git.test never got the real value in Basic auth")
	}
	out, code = run("", gitSetup+`cd /tmp/work
git push origin HEAD:main`)
	wantReason := "may update only refs/heads/agent/*"
	if code == 0 || !strings.Contains(out, "[remote rejected]") || !strings.Contains(out, wantReason) || !strings.Contains(out, fmt.Sprintf("sbx.hcl:%d", pushLine)) {
		t.Errorf("git push to main: exit %d; want it refused with the reason (%q, sbx.hcl:%d)\n%s", code, wantReason, pushLine, out)
	}
	if got := hostGit(t, bare, "rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved to %s", got)
	}

	// The real value is nowhere in the guest: not in any process's
	// environment, nor in anything printed, nor on the console.
	out, _ = run("root", `cat /proc/[0-9]*/environ | tr '\0' '\n'; env`)
	if !strings.Contains(out, "TOKEN="+placeholder) {
		t.Errorf("the guest's environments lack TOKEN=%s:\n%s", placeholder, out)
	}
	if strings.Contains(guestOut.String(), egressSecret) {
		t.Errorf("the guest saw the secret's value:\n%s", guestOut.String())
	}
	if bytes.Contains(sb.Console(), []byte(egressSecret)) {
		t.Error("the console holds the secret's value")
	}

	// Everything refused has an audit entry with a reason.
	refused := []struct {
		what  string
		match func(audit.Entry) bool
	}{
		{"denied.test", func(e audit.Entry) bool { return e.Name == "denied.test" }},
		{"169.254.169.254", func(e audit.Entry) bool { return e.Dst == "169.254.169.254" }},
		{"1.2.3.4", func(e audit.Entry) bool { return e.Dst == "1.2.3.4" }},
		{"fronting", func(e audit.Entry) bool { return e.Name == "api.test" && strings.Contains(e.Reason, "other.test") }},
		{"the placeholder to other.test", func(e audit.Entry) bool { return e.Name == "other.test" }},
		{"POST to ro.test", func(e audit.Entry) bool { return e.Name == "ro.test" && e.Method == "POST" && e.RuleLine == getLine }},
		{"push to main", func(e audit.Entry) bool {
			return e.Name == "git.test" && strings.Contains(e.Reason, "refs/heads/main") && e.RuleLine == pushLine
		}},
	}
	var entries []audit.Entry
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if entries, err = audit.Tail(auditDir, 10000); err != nil {
			t.Fatal(err)
		}
		missing := ""
		for _, r := range refused {
			found := false
			for _, e := range entries {
				if e.Decision == audit.DecisionDeny && e.Reason != "" && r.match(e) {
					found = true
				}
			}
			if !found {
				missing = r.what
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			var s strings.Builder
			for _, e := range entries {
				s.WriteString(audit.Format(e) + "\n")
			}
			t.Fatalf("no audit entry refusing %s with a reason:\n%s", missing, s.String())
		}
	}
	for _, e := range entries {
		if s := audit.Format(e); strings.Contains(s, egressSecret) || e.Decision == audit.DecisionDeny && e.Reason == "" {
			t.Errorf("audit entry %s", s)
		}
	}
	if raw, err := os.ReadFile(filepath.Join(auditDir, audit.File)); err != nil || bytes.Contains(raw, []byte(egressSecret)) {
		t.Errorf("the audit log: %v, or it holds the secret's value", err)
	}
}
