package sandboxnet_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/machine/machinetest"
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
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	})
	addr := tlsUpstream(t, cert, true, h)

	pol := policy.Sandbox{
		Allow: []policy.AllowRule{{Pattern: policy.MustHostPattern("api.test")}, {Pattern: policy.MustHostPattern("other.test")}},
		Hosts: []policy.HostMapping{{Name: "api.test", Addr: addr}, {Name: "other.test", Addr: addr}},
		Secrets: []policy.SecretBinding{{Name: "key", Env: "KEY", Hosts: []policy.HostPattern{policy.MustHostPattern("api.test")},
			Headers: []string{"x-api-key"}, Source: "env:KEY_VALUE", Origin: policy.Origin{Block: "secret.key", File: "sbx.hcl", Line: 7}}},
		CAs: []policy.CA{{Path: "upstream.pem", PEM: string(caPEM)}},
	}
	sb := bootVM(t, img, "quote", 5*time.Minute, pol, map[string][]byte{"key": []byte(value)})
	sb.install(t, "quoteattack", "/bin/quoteattack")
	for _, user := range []string{"agent", "root"} {
		out, st, err := sb.exec(2*time.Minute, user, "/bin/quoteattack")
		if err != nil || st.Code != 0 {
			t.Fatalf("%s: %v, exit %d:\n%s", user, err, st.Code, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
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
			t.Errorf("%s: %d probes ran:\n%s", user, probes, out)
		}
		if strings.Contains(out, value[:8]) {
			t.Errorf("%s: the guest saw part of the value:\n%s", user, out)
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
