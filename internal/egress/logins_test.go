package egress

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
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

func testJWT(t *testing.T, claims map[string]any) string {
	t.Helper()
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	sig := make([]byte, 256)
	rand.Read(sig)
	return enc(map[string]string{"alg": "RS256", "typ": "JWT"}) + "." + enc(claims) + "." + base64.RawURLEncoding.EncodeToString(sig)
}

type testTokens struct{ id, access, refresh string }

func newTestTokens(t *testing.T, exp time.Time, tag string) testTokens {
	return testTokens{
		id:      testJWT(t, map[string]any{"email": "dev@example.com", "exp": exp.Unix(), "tag": tag}),
		access:  testJWT(t, map[string]any{"exp": exp.Unix(), "tag": tag}),
		refresh: "rt_" + tag + "_" + strings.Repeat("x", 40),
	}
}

// TestLoginThroughEngine runs an OAuth login through the engine with real
// TLS on both sides: the guest's access placeholder reaches the API host
// as the real token, its refresh reaches the token endpoint with the real
// refresh token, the host's file is rotated, and the login's
// placeholders and tokens are refused everywhere else.
func TestLoginThroughEngine(t *testing.T) {
	pki := newUpstreamPKI(t)
	old := newTestTokens(t, time.Now().Add(-time.Minute), "old")
	next := newTestTokens(t, time.Now().Add(time.Hour), "next")

	var mu sync.Mutex
	valid := old.access
	var refreshSeen []string
	api := upstreamTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+valid {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		// Echo the credential: masking must hide it from the guest.
		fmt.Fprintf(w, `{"ok":true,"echo":%q}`, r.Header.Get("Authorization"))
	}), "chatgpt.com")
	tokens := upstreamTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		var req map[string]string
		json.NewDecoder(r.Body).Decode(&req)
		refreshSeen = append(refreshSeen, req["refresh_token"])
		if r.URL.Path != "/oauth/token" || req["refresh_token"] != old.refresh || req["client_id"] != "app_test" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		valid = next.access
		json.NewEncoder(w).Encode(map[string]string{"id_token": next.id, "access_token": next.access, "refresh_token": next.refresh})
	}), "auth.openai.com")
	other := upstreamTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}), "other.test")

	path := filepath.Join(t.TempDir(), "auth.json")
	doc := fmt.Sprintf(`{"auth_mode":"chatgpt","OPENAI_API_KEY":null,"tokens":{"id_token":%q,"access_token":%q,"refresh_token":%q,"account_id":"acct"},"last_refresh":"2026-12-01T00:00:00Z"}`, old.id, old.access, old.refresh)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	oa := policy.OAuth{TokenURL: "https://auth.openai.com/oauth/token", RefreshField: "refresh_token", ClientID: "app_test",
		IDToken: "tokens.id_token", AccessToken: "tokens.access_token", RefreshToken: "tokens.refresh_token", RefreshedAt: "last_refresh"}
	login, err := oauth.Open("codex", oa, path, oauth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := login.Render()
	if err != nil {
		t.Fatal(err)
	}
	var guestDoc struct {
		Tokens struct {
			AccessToken  string `json:"access_token"`
			RefreshToken string `json:"refresh_token"`
		} `json:"tokens"`
	}
	if err := json.Unmarshal(rendered, &guestDoc); err != nil || guestDoc.Tokens.AccessToken == "" {
		t.Fatalf("the rendered file: %v", err)
	}
	ghAccess, ghRefresh := guestDoc.Tokens.AccessToken, guestDoc.Tokens.RefreshToken

	p := spec(pki, []policy.AllowRule{allow("chatgpt.com", 1), allow("auth.openai.com", 2), allow("other.test", 3)},
		mapping("chatgpt.com", serverAddr(api)), mapping("auth.openai.com", serverAddr(tokens)), mapping("other.test", serverAddr(other)))
	p.Secrets = []policy.SecretBinding{{Name: "codex", Env: "CODEX_ACCESS_TOKEN", Hosts: []policy.HostPattern{policy.MustHostPattern("chatgpt.com")},
		Source: "file:" + path, OAuth: &oa, Origin: origin("secret.codex", 20)}}
	h := newHarness(t, policy.Sandbox{}, nil, nil)
	pol, err := CompileLogins(p, nil, nil, map[string]*oauth.Login{"codex": login})
	if err != nil {
		t.Fatal(err)
	}
	h.eng.Update(pol)
	c := h.client(true)

	do := func(method, url, auth, ct, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	var guestSaw []string
	check := func(what string, status, want int, body string) {
		t.Helper()
		guestSaw = append(guestSaw, body)
		if status != want {
			t.Errorf("%s: status %d, want %d: %s", what, status, want, body)
		}
	}

	st, body := do("GET", "https://chatgpt.com/backend-api/wham/accounts/check", "Bearer "+ghAccess, "", "")
	check("a request with the access placeholder", st, 200, body)
	if !strings.Contains(body, ghAccess) {
		t.Errorf("the echoed credential did not come back as the placeholder: %s", body)
	}

	st, body = do("POST", "https://auth.openai.com/oauth/token", "", "application/json",
		`{"client_id":"app_test","grant_type":"refresh_token","refresh_reason":"expired","refresh_token":"`+ghRefresh+`"}`)
	check("the guest's refresh", st, 200, body)
	var reply map[string]string
	json.Unmarshal([]byte(body), &reply)
	mu.Lock()
	if len(refreshSeen) != 1 || refreshSeen[0] != old.refresh {
		t.Errorf("the token endpoint did not see the real refresh token once")
	}
	mu.Unlock()
	host, _ := os.ReadFile(path)
	if !strings.Contains(string(host), next.refresh) || !strings.Contains(string(host), next.access) || !strings.Contains(string(host), next.id) {
		t.Errorf("the host's file does not hold the rotated tokens")
	}

	st, body = do("GET", "https://chatgpt.com/backend-api/wham/accounts/check", "Bearer "+reply["access_token"], "", "")
	check("a request with the new access placeholder", st, 200, body)

	st, body = do("GET", "https://other.test/", "Bearer "+reply["access_token"], "", "")
	check("the access placeholder to a host it is not bound to", st, 403, body)
	st, body = do("POST", "https://other.test/upload", "", "application/json", `{"t":"`+reply["refresh_token"]+`"}`)
	if st == 200 {
		t.Errorf("the refresh placeholder in a body to another host was sent: %d", st)
	}
	guestSaw = append(guestSaw, body)
	st, body = do("GET", "https://chatgpt.com/x", "", "", "")
	check("no credential", st, 401, body)
	req, _ := http.NewRequest("GET", "https://chatgpt.com/x", nil)
	req.Header.Set("X-Token", reply["access_token"])
	if res, err := c.Do(req); err != nil {
		t.Errorf("the access placeholder in another header: %v", err)
	} else {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		guestSaw = append(guestSaw, string(b))
		if res.StatusCode != 403 {
			t.Errorf("the access placeholder in another header: %d %s", res.StatusCode, b)
		}
	}
	st, body = do("POST", "https://auth.openai.com/oauth/token", "", "application/json",
		`{"grant_type":"refresh_token","refresh_token":"sbx_ph_codex_refresh_0123456789abcdef0123456789abcdef"}`)
	check("a refresh with an unknown placeholder", st, 403, body)
	if !strings.Contains(body, "sbx refused this refresh") {
		t.Errorf("the refusal does not say why: %s", body)
	}
	mu.Lock()
	if len(refreshSeen) != 1 {
		t.Errorf("the token endpoint was called %d times; want once", len(refreshSeen))
	}
	mu.Unlock()

	c.CloseIdleConnections()
	h.waitIdle()
	logged, _ := json.Marshal(h.entries())
	for _, tt := range []testTokens{old, next} {
		for _, v := range []string{tt.id, tt.access, tt.refresh, tt.access[strings.LastIndexByte(tt.access, '.')+1:]} {
			for i, b := range guestSaw {
				if strings.Contains(b, v) {
					t.Errorf("reply %d to the guest holds a real token", i)
				}
			}
			if strings.Contains(string(logged), v) {
				t.Errorf("the audit log holds a real token")
			}
		}
	}
	var refused, refreshed bool
	for _, e := range h.entries() {
		if e.Name == "auth.openai.com" && e.Decision == audit.DecisionDeny && strings.Contains(e.Reason, "not a placeholder") {
			refused = true
		}
		if e.Name == "auth.openai.com" && e.Decision == audit.DecisionAllow && len(e.Secrets) == 1 && e.Secrets[0] == "codex" {
			refreshed = true
		}
	}
	if !refused || !refreshed {
		t.Errorf("audit: refused refresh logged %v, brokered refresh logged %v", refused, refreshed)
	}
}

func TestCompileLoginNeedsALogin(t *testing.T) {
	p := policy.Sandbox{Secrets: []policy.SecretBinding{{Name: "codex", Env: "C", Hosts: []policy.HostPattern{policy.MustHostPattern("chatgpt.com")},
		OAuth: &policy.OAuth{TokenURL: "https://auth.openai.com/oauth/token", AccessToken: "a", RefreshToken: "r"}}}}
	if _, err := Compile(p, map[string][]byte{"codex": []byte("some file content")}, map[string]string{"codex": "sbx_ph_x"}); err == nil || !strings.Contains(err.Error(), "OAuth login") {
		t.Errorf("Compile = %v; want an OAuth secret refused without its login", err)
	}
}

// loginPolicy compiles a policy whose one secret is a login on a new
// credential file, and returns it with the guest's refresh placeholder.
func loginPolicy(t *testing.T) (*Policy, string) {
	t.Helper()
	tt := newTestTokens(t, time.Now().Add(time.Hour), "ws")
	path := filepath.Join(t.TempDir(), "auth.json")
	doc := fmt.Sprintf(`{"tokens":{"id_token":%q,"access_token":%q,"refresh_token":%q}}`, tt.id, tt.access, tt.refresh)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	oa := policy.OAuth{TokenURL: "https://auth.openai.com/oauth/token", RefreshField: "refresh_token",
		IDToken: "tokens.id_token", AccessToken: "tokens.access_token", RefreshToken: "tokens.refresh_token"}
	login, err := oauth.Open("codex", oa, path, oauth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := login.Render()
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Tokens struct {
			RefreshToken string `json:"refresh_token"`
		} `json:"tokens"`
	}
	json.Unmarshal(rendered, &g)
	p := policy.Sandbox{
		Allow: []policy.AllowRule{allow("chatgpt.com", 1), allow("auth.openai.com", 2), allow("other.test", 3)},
		Secrets: []policy.SecretBinding{{Name: "codex", Env: "CODEX_ACCESS_TOKEN", Hosts: []policy.HostPattern{policy.MustHostPattern("chatgpt.com")},
			OAuth: &oa, Origin: origin("secret.codex", 20)}},
	}
	pol, err := CompileLogins(p, nil, nil, map[string]*oauth.Login{"codex": login})
	if err != nil {
		t.Fatal(err)
	}
	return pol, g.Tokens.RefreshToken
}

type nopStream struct{ io.Reader }

func (nopStream) Write(p []byte) (int, error) { return len(p), nil }
func (nopStream) Close() error                { return nil }

// TestLoginInWebSocketFrames checks that a login's placeholder in a
// guest WebSocket frame to a host the login is not bound to ends the
// stream, and that a policy whose only secret is a login allows no
// upgrade but WebSocket.
func TestLoginInWebSocketFrames(t *testing.T) {
	pol, ph := loginPolicy(t)
	up := nopStream{strings.NewReader("")}
	c := newWSConn(up, newReplacer(nil), pol, "other.test")
	if _, err := c.upw.feed(nil, frame(true, 0, wsText, []byte(`{"t":"`+ph+`"}`), true)); err == nil {
		t.Errorf("a login's refresh placeholder in a frame to other.test was passed on")
	}
	c = newWSConn(up, newReplacer(nil), pol, "chatgpt.com")
	if _, err := c.upw.feed(nil, frame(true, 0, wsText, []byte(`{"t":"hello"}`), true)); err != nil {
		t.Errorf("an ordinary frame to chatgpt.com was refused: %v", err)
	}
	h := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"h2c"}}
	if pol.upgradeRefusal(h) == "" {
		t.Errorf("an h2c upgrade was allowed with a login in the policy")
	}
}
