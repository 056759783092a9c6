package sandboxnet_test

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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/guestconn"
	"github.com/sbx-dev/sbx/internal/boot"
	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/sandboxnet"
	"github.com/sbx-dev/sbx/machine"
	"github.com/sbx-dev/sbx/policy"
)

// TestQuoteAttackInVM boots a VM whose guest, as the sandbox user and as
// root, runs testdata/quoteattack against an upstream that quotes the
// first and last 24 bytes of every credential it rejects: the placeholder
// beside known bytes in Bearer, x-api-key (which the secret names), Basic,
// another header and the query, the rebuilt value sent reversed to
// another host, plain HTTP to the secret's host, and the placeholder in a
// body to another host. Every probe is refused by the host, the guest
// rebuilds nothing, and the upstream never receives a part of the value.
func TestQuoteAttackInVM(t *testing.T) {
	_, _, img := machinetest.Require(t)
	const value = "sk-live-7c1e9a2b4d6f8031a5c7e9b2d4f60813"
	caPEM, cert := upstreamCA(t, "api.test", "other.test")
	var mu sync.Mutex
	var got []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var rec strings.Builder
		fmt.Fprintf(&rec, "%s %s %s\n", r.Host, r.Method, r.URL)
		for k, vs := range r.Header {
			for _, v := range vs {
				fmt.Fprintf(&rec, "%s: %s\n", k, v)
			}
		}
		rec.Write(body)
		mu.Lock()
		got = append(got, rec.String())
		mu.Unlock()
		if r.Header.Get("Authorization") == "Bearer "+value || r.Header.Get("X-Api-Key") == value {
			io.WriteString(w, "ok")
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
		var creds []string
		if a := r.Header.Get("Authorization"); a != "" {
			_, c, _ := strings.Cut(a, " ")
			if _, pass, ok := r.BasicAuth(); ok {
				c = pass
			}
			creds = append(creds, c)
		}
		for k, vs := range r.Header {
			if strings.HasPrefix(k, "X-") {
				creds = append(creds, vs...)
			}
		}
		for _, c := range creds {
			first, last := c, c
			if len(c) > 24 {
				first, last = c[:24], c[len(c)-24:]
			}
			fmt.Fprintf(w, "invalid credential first=%s last=%s\n", first, last)
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	addr := srv.Listener.Addr().String()

	pol := policy.Sandbox{
		Allow: []policy.AllowRule{{Pattern: policy.MustHostPattern("api.test")}, {Pattern: policy.MustHostPattern("other.test")}},
		Hosts: []policy.HostMapping{{Name: "api.test", Addr: addr}, {Name: "other.test", Addr: addr}},
		Secrets: []policy.SecretBinding{{Name: "key", Env: "KEY", Hosts: []policy.HostPattern{policy.MustHostPattern("api.test")},
			Headers: []string{"x-api-key"}, Source: "env:KEY_VALUE", Origin: policy.Origin{Block: "secret.key", File: "sbx.hcl", Line: 7}}},
		CAs: []policy.CA{{Path: "upstream.pem", PEM: string(caPEM)}},
	}
	auth, err := ca.New()
	if err != nil {
		t.Fatal(err)
	}
	mdir, err := os.MkdirTemp("", "sbx-quote-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(mdir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sb, err := boot.Start(ctx, boot.Options{
		Machine: machine.Options{Name: "quote", Image: img, Memory: 512 << 20, Dir: mdir},
		Net: sandboxnet.Options{Sandbox: "quote", Policy: pol, Secrets: map[string][]byte{"key": []byte(value)},
			AuditDir: t.TempDir(), CA: auth},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, n := sb.Machine, sb.Net
	defer n.Close()
	defer m.Stop(context.Background())

	prog := filepath.Join(t.TempDir(), "quoteattack")
	build := exec.Command("go", "build", "-trimpath", "-o", prog, "./testdata/quoteattack")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the attack: %v\n%s", err, b)
	}
	b, err := os.ReadFile(prog)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Put(ctx, bytes.NewReader(b), "/bin/quoteattack", 0o755, nil); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"agent", "root"} {
		var out bytes.Buffer
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
		st, err := m.Exec(rctx, guestconn.Cmd{Args: []string{"/bin/quoteattack"}, User: user, Stdout: &out, Stderr: &out})
		rcancel()
		if err != nil || st.Code != 0 {
			t.Fatalf("%s: %v, exit %d:\n%s", user, err, st.Code, out.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		var probes int
		for _, l := range lines {
			f := strings.Fields(l)
			switch {
			case len(f) == 2 && (f[0] == "bearer" || f[0] == "x-api-key") && f[1] != "200":
				t.Errorf("%s: the secret where it goes: %s", user, l)
			case len(f) == 3 && f[0] == "probe":
				probes++
				if f[2] != "403" {
					t.Errorf("%s: %s, want the host's refusal", user, l)
				}
			case len(f) == 2 && (f[0] == "plain-http" || f[0] == "body-other-host") && f[1] != "403":
				t.Errorf("%s: %s, want the host's refusal", user, l)
			case strings.HasPrefix(l, "recovered "):
				if l != `recovered ""` {
					t.Errorf("%s: the guest rebuilt %s", user, l)
				}
			}
		}
		if probes != 21 {
			t.Errorf("%s: %d probes ran:\n%s", user, probes, out.String())
		}
		if strings.Contains(out.String(), value[:8]) {
			t.Errorf("%s: the guest saw part of the value:\n%s", user, out.String())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range got {
		for _, line := range strings.Split(r, "\n") {
			if line == "Authorization: Bearer "+value || line == "X-Api-Key: "+value {
				continue
			}
			for i := 0; i+4 <= len(value); i++ {
				if strings.Contains(line, value[i:i+4]) {
					t.Errorf("the upstream got %q, with %q of the value", line, value[i:i+4])
					break
				}
			}
		}
	}
}
