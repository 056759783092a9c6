package egress

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/egress/oauth"
	"github.com/sbx-dev/sbx/policy"
)

// TestSelfRefreshThroughEngine has the engine refresh a login by itself:
// with the access token an hour from expiry RefreshLogins sends nothing;
// within oauth.SelfRefreshWindow of it, the token endpoint (reached over
// real TLS through the spec's hosts mapping and CA) gets the real
// refresh token with the spec's client_id and scope, the host's file
// holds the rotated tokens, the audit log has one allow entry with no
// token in it, and a second engine on the same file (another sandbox)
// does not refresh again. SelfRefresh runs until its context ends.
func TestSelfRefreshThroughEngine(t *testing.T) {
	pki := newUpstreamPKI(t)
	now := time.Now()
	old := newTestTokens(t, now.Add(time.Hour), "old")
	next := newTestTokens(t, now.Add(2*time.Hour), "next")
	var mu sync.Mutex
	var seen []map[string]string
	tokens := upstreamTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]string
		json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		seen = append(seen, req)
		mu.Unlock()
		if r.URL.Path != "/oauth/token" || req["refresh_token"] != old.refresh {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"id_token": next.id, "access_token": next.access, "refresh_token": next.refresh})
	}), "auth.openai.com")

	path := filepath.Join(t.TempDir(), "auth.json")
	doc := fmt.Sprintf(`{"auth_mode":"chatgpt","tokens":{"id_token":%q,"access_token":%q,"refresh_token":%q}}`, old.id, old.access, old.refresh)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	oa := policy.OAuth{TokenURL: "https://auth.openai.com/oauth/token", RefreshField: "refresh_token", ClientID: "app_test",
		Scope: "openid offline_access", IDToken: "tokens.id_token", AccessToken: "tokens.access_token", RefreshToken: "tokens.refresh_token"}
	clock := now
	var clockMu sync.Mutex
	opts := oauth.Options{Now: func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }}
	engine := func() (*harness, *oauth.Login) {
		login, err := oauth.Open("codex", oa, path, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := login.Render(); err != nil {
			t.Fatal(err)
		}
		p := spec(pki, []policy.AllowRule{allow("auth.openai.com", 1)}, mapping("auth.openai.com", serverAddr(tokens)))
		p.Secrets = []policy.SecretBinding{{Name: "codex", Env: "CODEX_LOGIN", Hosts: []policy.HostPattern{policy.MustHostPattern("auth.openai.com")},
			Source: "file:" + path, OAuth: &oa, Origin: origin("secret.codex", 20)}}
		h := newHarness(t, policy.Sandbox{}, nil, nil)
		pol, err := CompileLogins(p, nil, nil, map[string]*oauth.Login{"codex": login})
		if err != nil {
			t.Fatal(err)
		}
		h.eng.Update(pol)
		return h, login
	}
	a, _ := engine()
	b, _ := engine()

	if n := a.eng.RefreshLogins(context.Background()); n != 0 || len(seen) != 0 {
		t.Fatalf("an hour before expiry: %d refreshed, %d requests", n, len(seen))
	}
	clockMu.Lock()
	clock = now.Add(time.Hour - oauth.SelfRefreshWindow + time.Second)
	clockMu.Unlock()
	if n := a.eng.RefreshLogins(context.Background()); n != 1 {
		t.Fatalf("within the window: %d refreshed", n)
	}
	if n := b.eng.RefreshLogins(context.Background()); n != 0 {
		t.Errorf("a second engine on the same file refreshed again: %d", n)
	}
	mu.Lock()
	if len(seen) != 1 || seen[0]["refresh_token"] != old.refresh || seen[0]["client_id"] != "app_test" ||
		seen[0]["scope"] != "openid offline_access" || seen[0]["grant_type"] != "refresh_token" {
		t.Errorf("the token endpoint got %v: want one refresh with the real refresh token, client_id and scope", seen)
	}
	mu.Unlock()
	host, _ := os.ReadFile(path)
	if !strings.Contains(string(host), next.refresh) || !strings.Contains(string(host), next.access) {
		t.Errorf("the host's file does not hold the rotated tokens")
	}
	es := a.entriesAfter(0, func(e audit.Entry) bool { return e.Name == "auth.openai.com" })
	if len(es) != 1 || es[0].Decision != audit.DecisionAllow || es[0].Path != "/oauth/token" || len(es[0].Secrets) != 1 {
		t.Errorf("the audit log: %+v, want one allow entry for the refresh", es)
	}
	raw, _ := os.ReadFile(filepath.Join(a.auditDir, audit.File))
	for _, tok := range []string{old.refresh, next.refresh, old.access, next.access} {
		if strings.Contains(string(raw), tok) {
			t.Errorf("the audit log holds a real token")
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.eng.SelfRefresh(ctx, time.Millisecond); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("SelfRefresh did not return once its context ended")
	}
}
