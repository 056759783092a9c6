package e2etest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx"
	"github.com/sbx-dev/sbx/internal/egress/audit"
)

// rulesUpstream records every request it gets, as it got it.
type rulesUpstream struct {
	mu   sync.Mutex
	reqs []string
}

func (u *rulesUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // an incomplete body is not acted on
	}
	u.mu.Lock()
	u.reqs = append(u.reqs, fmt.Sprintf("%s %s %s %q", r.Host, r.Method, r.RequestURI, body))
	u.mu.Unlock()
	io.WriteString(w, "reached")
}

func (u *rulesUpstream) take() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := u.reqs
	u.reqs = nil
	return out
}

// guestRequest is one request rawreq sends from the guest.
type guestRequest struct {
	proto, method, host, target, header, body string
}

func (g guestRequest) line() string {
	hdr, body := g.header, "-"
	if hdr == "" {
		hdr = "-"
	}
	if g.body != "" {
		body = strconv.Quote(g.body)
	}
	return strings.Join([]string{g.proto, g.method, g.host, g.target, hdr, body}, "\t")
}

// TestRequestRulesInVM boots a busybox guest whose egress narrows three
// hosts by paths, methods and git_push, and plays the guest, as its user
// and as root, with a program that writes raw HTTP/1.1 request lines and
// raw HTTP/2 frames (testdata/rules/rawreq): paths a lenient server
// routes outside /public ("..;", encoded dots, "\", "%252e"), method
// overrides by header, query and form field, lower-case methods, and a
// push to main written with a lower-case method or an encoded path. Each
// is refused with a 403 (git's refusal for the pushes) naming its rule,
// none reaches the upstream, and the audit log names the rule's line;
// ordinary requests pass.
func TestRequestRulesInVM(t *testing.T) {
	cfgDir := t.TempDir()
	for _, name := range []string{"kernel.deb", "busybox.deb"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfgDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	buildCtx, cancelBuild := context.WithTimeout(context.Background(), 3*time.Minute)
	build := exec.CommandContext(buildCtx, "go", "build", "-trimpath", "-o", filepath.Join(cfgDir, "rawreq"), "./testdata/rules/rawreq")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := build.CombinedOutput(); err != nil {
		cancelBuild()
		t.Fatalf("building rawreq: %v\n%s", err, out)
	}
	cancelBuild()

	caPEM, cert := testPKI(t, "paths.test", "methods.test", "git.test")
	up := &rulesUpstream{}
	srv := httptest.NewUnstartedServer(up)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	tmpl, err := os.ReadFile("testdata/rules/sbx.hcl")
	if err != nil {
		t.Fatal(err)
	}
	spec := strings.ReplaceAll(string(tmpl), "@UPSTREAM@", srv.Listener.Addr().String())
	ruleLine := map[string]int{}
	for i, l := range strings.Split(spec, "\n") {
		if h, ok := strings.CutPrefix(strings.TrimSpace(l), `request "`); ok {
			ruleLine[strings.TrimSuffix(h, `" {`)] = i + 1
		}
	}
	for name, data := range map[string]string{"sbx.hcl": spec, "upstream-ca.pem": string(caPEM)} {
		if err := os.WriteFile(filepath.Join(cfgDir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Setenv("XDG_STATE_HOME", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cfg, err := sbx.Load(cfgDir, sbx.Options{Environ: environ})
	if err != nil {
		t.Fatal(err)
	}
	auditDir := t.TempDir()
	start := time.Now()
	sb, err := sbx.Start(ctx, cfg, "rules", sbx.StartOptions{AuditDir: auditDir})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop(context.Background())
	t.Logf("built and booted in %v", time.Since(start).Round(time.Second))

	zero := strings.Repeat("0", 40)
	cmd := zero + " " + strings.Repeat("a", 40) + " refs/heads/main\x00report-status side-band-64k\n"
	push := fmt.Sprintf("%04x%s0000", len(cmd)+4, cmd)

	var refused, pushes, allowed []guestRequest
	for _, proto := range []string{"h1", "h2"} {
		for _, target := range []string{
			"/public/..;/admin", "/public;x/../admin", "/public/..%3B/admin", `/public/..\admin`, "/public/..%5Cadmin",
			"/public/%2e%2e/admin", "/public/.%2E/admin", "/public/%252e%252e/admin", "/public/%c0%ae%c0%ae/admin",
			"/public/%EF%BC%8E%EF%BC%8E/admin", "/public/a%2F..%2F..%2Fadmin", "/public//../admin",
		} {
			refused = append(refused, guestRequest{proto, "GET", "paths.test", target, "", ""})
		}
		for _, g := range []guestRequest{
			{method: "GET", target: "/items/1", header: "X-HTTP-Method-Override: DELETE"},
			{method: "GET", target: "/items/1", header: "x-http-method: DELETE"},
			{method: "GET", target: "/items/1", header: "X-Method-Override: PUT"},
			{method: "GET", target: "/items/1?_method=DELETE"},
			{method: "GET", target: "/items/1?a=1&_METHOD=DELETE"},
			{method: "get", target: "/items/1"},
			{method: "delete", target: "/items/1"},
			{method: "POST", target: "/items/1", header: "Content-Type: application/x-www-form-urlencoded", body: "a=1&_method=DELETE"},
		} {
			g.proto, g.host = proto, "methods.test"
			refused = append(refused, g)
		}
		for _, target := range []string{"/repo.git/git-receive-pack", "/repo.git/git%252Dreceive-pack", "/repo.git?service=git-receive-pack"} {
			for _, method := range []string{"post", "POST"} {
				pushes = append(pushes, guestRequest{proto, method, "git.test", target, "", push})
			}
		}
		allowed = append(allowed,
			guestRequest{proto, "GET", "paths.test", "/public/x", "", ""},
			guestRequest{proto, "GET", "paths.test", "/public/a%2Fb", "", ""},
			guestRequest{proto, "GET", "methods.test", "/items/1?method=x", "", ""},
			guestRequest{proto, "POST", "methods.test", "/items/1", "Content-Type: application/json", `{"_method":"x"}`},
		)
	}
	var script strings.Builder
	all := append(append(append([]guestRequest(nil), refused...), pushes...), allowed...)
	for _, g := range all {
		script.WriteString(g.line() + "\n")
	}

	for _, user := range []string{"", "root"} {
		var out bytes.Buffer
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Minute)
		st, err := sb.Exec(rctx, sbx.Cmd{Args: []string{"/usr/local/bin/rawreq"}, User: user, Stdin: strings.NewReader(script.String()), Stdout: &out, Stderr: &out})
		rcancel()
		if err != nil || st.Code != 0 {
			t.Fatalf("rawreq as %q: %v %v\n%s", user, st, err, out.String())
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(lines) != len(all) {
			t.Fatalf("rawreq as %q printed %d lines for %d requests:\n%s", user, len(lines), len(all), out.String())
		}
		for i, g := range all {
			code, body, _ := strings.Cut(lines[i], "\t")
			switch {
			case i < len(refused):
				want := fmt.Sprintf("sbx.hcl:%d", ruleLine[g.host])
				if code != "403" || !strings.Contains(body, want) {
					t.Errorf("as %q: %s: %s %s, want a 403 naming %s", user, g.line(), code, body, want)
				}
			case i < len(refused)+len(pushes):
				if code != "200" || !strings.Contains(body, "may update only refs/heads/agent/*") {
					t.Errorf("as %q: %s: %s %s, want git's refusal", user, g.line(), code, body)
				}
			default:
				if code != "200" || body != "reached" {
					t.Errorf("as %q: %s: %s %s, want it through", user, g.line(), code, body)
				}
			}
		}
		got := up.take()
		if len(got) != len(allowed) {
			t.Errorf("as %q: the upstream got %d requests, want the %d allowed ones:\n%s", user, len(got), len(allowed), strings.Join(got, "\n"))
		}
		for _, r := range got {
			if strings.Contains(r, "admin") || strings.Contains(r, "receive-pack") || strings.Contains(r, "_method=DELETE") {
				t.Errorf("as %q: the upstream got %s", user, r)
			}
		}
	}

	// Every refusal is in the audit log with its rule's line.
	var entries []audit.Entry
	want := 2 * len(refused)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if entries, err = audit.Tail(auditDir, 10000); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range entries {
			if e.Decision == audit.DecisionDeny && strings.HasSuffix(e.RuleFile, "sbx.hcl") && (e.RuleLine == ruleLine["paths.test"] || e.RuleLine == ruleLine["methods.test"]) {
				n++
			}
		}
		if n >= want {
			return
		}
	}
	var s strings.Builder
	for _, e := range entries {
		s.WriteString(audit.Format(e) + "\n")
	}
	t.Errorf("the audit log does not hold %d refusals naming the request rules:\n%s", want, s.String())
}
