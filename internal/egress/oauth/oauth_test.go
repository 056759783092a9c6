package oauth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/policy"
)

var codexSpec = policy.OAuth{
	TokenURL:     "https://auth.openai.com/oauth/token",
	RefreshField: "refresh_token",
	IDToken:      "tokens.id_token",
	AccessToken:  "tokens.access_token",
	RefreshToken: "tokens.refresh_token",
	RefreshedAt:  "last_refresh",
}

// testJWT makes a compact JWS with the given claims and a fixed
// signature, as an identity provider's token looks to a client.
func testJWT(t *testing.T, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": "k1"})
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc(h) + "." + enc(c) + "." + enc(bytes.Repeat([]byte("real-signature-"), 16))
}

type login struct {
	id, access, refresh string
}

func newLogin(t *testing.T, gen int) login {
	exp := time.Now().Add(time.Hour).Unix()
	return login{
		id:      testJWT(t, map[string]any{"email": "user@example.com", "gen": gen, "https://api.openai.com/auth": map[string]any{"chatgpt_plan_type": "pro", "chatgpt_account_id": "acct-1"}}),
		access:  testJWT(t, map[string]any{"exp": exp, "gen": gen, "scp": []string{"openid"}}),
		refresh: fmt.Sprintf("rt_real-refresh-token-generation-%d", gen),
	}
}

// writeAuth writes a Codex-shaped auth.json holding lg.
func writeAuth(t *testing.T, path string, lg login) {
	t.Helper()
	doc := map[string]any{
		"auth_mode":      "chatgpt",
		"OPENAI_API_KEY": nil,
		"tokens": map[string]any{
			"id_token": lg.id, "access_token": lg.access, "refresh_token": lg.refresh, "account_id": "acct-1",
		},
		"last_refresh": "2026-01-01T00:00:00Z",
	}
	data, _ := json.Marshal(doc)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func readAuth(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("credential file is not JSON: %v", err)
	}
	return m
}

func tokensOf(m map[string]any) login {
	tk, _ := m["tokens"].(map[string]any)
	s := func(k string) string { v, _ := tk[k].(string); return v }
	return login{id: s("id_token"), access: s("access_token"), refresh: s("refresh_token")}
}

func claimsOf(t *testing.T, jwt string) string {
	t.Helper()
	_, c, _, ok := jwtParts(jwt)
	if !ok {
		t.Fatalf("%.20q... is not a JWT", jwt)
	}
	return c
}

func openLogin(t *testing.T, path string) *Login {
	t.Helper()
	l, err := Open("codex", codexSpec, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestRenderKeepsClaimsAndChangesSignature(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.json")
	real := newLogin(t, 1)
	writeAuth(t, path, real)
	l := openLogin(t, path)
	out, err := l.Render()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{real.id, real.access, real.refresh} {
		if bytes.Contains(out, []byte(v)) {
			t.Fatalf("the guest's file holds a real token:\n%s", out)
		}
	}
	m := readAuth(t, out)
	g := tokensOf(m)
	for _, p := range [][2]string{{real.id, g.id}, {real.access, g.access}} {
		if claimsOf(t, p[0]) != claimsOf(t, p[1]) {
			t.Errorf("placeholder changed the JWT's claims")
		}
		rh, _, rs, _ := jwtParts(p[0])
		gh, _, gs, _ := jwtParts(p[1])
		if rh != gh {
			t.Errorf("placeholder changed the JWT's header")
		}
		if rs == gs || len(gs) < len(rs) {
			t.Errorf("placeholder signature %q vs real %q: want a different one of at least the same length", gs, rs)
		}
	}
	if !strings.HasPrefix(g.refresh, "sbx_ph_codex") {
		t.Errorf("refresh placeholder %q: want an sbx_ph_ placeholder", g.refresh)
	}
	if m["auth_mode"] != "chatgpt" || m["last_refresh"] != "2026-01-01T00:00:00Z" || m["tokens"].(map[string]any)["account_id"] != "acct-1" {
		t.Errorf("render changed fields that are not tokens: %s", out)
	}
	if _, ok := m["OPENAI_API_KEY"]; !ok {
		t.Errorf("render dropped a null field: %s", out)
	}
	// A second render mints new placeholders.
	out2, _ := l.Render()
	if g2 := tokensOf(readAuth(t, out2)); g2.access == g.access || g2.refresh == g.refresh {
		t.Errorf("a second render reused placeholders")
	}
}

func TestAccessTokenSubstitution(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.json")
	real := newLogin(t, 1)
	writeAuth(t, path, real)
	l := openLogin(t, path)
	out, _ := l.Render()
	g := tokensOf(readAuth(t, out))
	if v, ok := l.AccessToken(g.access); !ok || v != real.access {
		t.Fatalf("AccessToken(placeholder) = %v: want the real access token", ok)
	}
	for _, s := range []string{real.access, g.refresh, g.id, "", g.access + "x"} {
		if _, ok := l.AccessToken(s); ok {
			t.Errorf("AccessToken(%.24q) was accepted: only a minted access placeholder stands for the access token", s)
		}
	}
	// Rotated on the host (the user's own CLI): the placeholder stands
	// for the file's new access token.
	time.Sleep(10 * time.Millisecond)
	next := newLogin(t, 2)
	writeAuth(t, path, next)
	if v, ok := l.AccessToken(g.access); !ok || v != next.access {
		t.Fatalf("after a rotation on the host, AccessToken does not give the file's access token")
	}
}

// tokenServer is a fake token endpoint over real TLS: it checks the
// refresh token it gets and rotates the login.
type tokenServer struct {
	t       *testing.T
	srv     *httptest.Server
	calls   atomic.Int32
	mu      sync.Mutex
	want    string
	next    login
	gotBody []string
}

func newTokenServer(t *testing.T, want string, next login) *tokenServer {
	ts := &tokenServer{t: t, want: want, next: next}
	ts.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		ts.mu.Lock()
		ts.gotBody = append(ts.gotBody, string(body))
		ts.mu.Unlock()
		var rt string
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			var m map[string]any
			json.Unmarshal(body, &m)
			rt, _ = m["refresh_token"].(string)
		} else {
			v, _ := url.ParseQuery(string(body))
			rt = v.Get("refresh_token")
		}
		time.Sleep(50 * time.Millisecond) // widen the window for a second refresher
		if rt != ts.want {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":"invalid_grant","error_description":"refresh token %s is not valid"}`, rt)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"id_token": ts.next.id, "access_token": ts.next.access, "refresh_token": ts.next.refresh})
	}))
	t.Cleanup(ts.srv.Close)
	return ts
}

func (ts *tokenServer) upstream() Upstream {
	return func(ctx context.Context, ct string, body []byte) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", ts.srv.URL+"/oauth/token", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Accept-Encoding", "identity")
		return ts.srv.Client().Do(req)
	}
}

func refreshBody(ph string) []byte {
	b, _ := json.Marshal(map[string]string{"client_id": "app_test", "grant_type": "refresh_token", "refresh_token": ph})
	return b
}

func TestBrokeredRefresh(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "auth.json")
	real, next := newLogin(t, 1), newLogin(t, 2)
	writeAuth(t, path, real)
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	ts := newTokenServer(t, real.refresh, next)
	l := openLogin(t, path)
	out, _ := l.Render()
	g := tokensOf(readAuth(t, out))

	r, err := l.Refresh(context.Background(), "application/json", refreshBody(g.refresh), ts.upstream())
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 200 || !r.Upstream {
		t.Fatalf("refresh: status %d upstream %v body %s", r.Status, r.Upstream, r.Body)
	}
	if ts.gotBody[0] != string(refreshBody(real.refresh)) {
		t.Errorf("the token endpoint got %s: want the guest's body with the real refresh token", ts.gotBody[0])
	}
	for _, v := range []string{next.id, next.access, next.refresh, real.refresh} {
		if bytes.Contains(r.Body, []byte(v)) {
			t.Fatalf("the guest's refresh response holds a real token: %s", r.Body)
		}
	}
	var resp map[string]string
	json.Unmarshal(r.Body, &resp)
	if claimsOf(t, resp["id_token"]) != claimsOf(t, next.id) || claimsOf(t, resp["access_token"]) != claimsOf(t, next.access) {
		t.Errorf("the new placeholders do not carry the new tokens' claims")
	}
	// The host's file holds the rotated tokens, same mode, no leftovers.
	data, _ := os.ReadFile(path)
	m := readAuth(t, data)
	if got := tokensOf(m); got != next {
		t.Errorf("the host's file was not rotated: %+v", got)
	}
	if m["auth_mode"] != "chatgpt" || m["last_refresh"] == "2026-01-01T00:00:00Z" {
		t.Errorf("write-back lost fields or did not stamp last_refresh: %s", data)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("write-back changed the file's mode to %v", fi.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != "auth.json" && e.Name() != ".auth.json.sbx-lock" {
			t.Errorf("write-back left %s behind", e.Name())
		}
	}
	// The new access placeholder stands for the new access token, and
	// so does the old one (the guest may still hold it).
	if v, ok := l.AccessToken(resp["access_token"]); !ok || v != next.access {
		t.Errorf("the new access placeholder does not give the new access token")
	}
	if v, ok := l.AccessToken(g.access); !ok || v != next.access {
		t.Errorf("the old access placeholder does not give the current access token")
	}
	// The refreshed placeholder refreshes again (upstream sees next).
	ts.mu.Lock()
	ts.want, ts.next = next.refresh, newLogin(t, 3)
	ts.mu.Unlock()
	r, err = l.Refresh(context.Background(), "application/json", refreshBody(resp["refresh_token"]), ts.upstream())
	if err != nil || r.Status != 200 || !r.Upstream {
		t.Fatalf("second refresh: %v %+v", err, r)
	}
}

func TestRefreshForm(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.json")
	real, next := newLogin(t, 1), newLogin(t, 2)
	writeAuth(t, path, real)
	ts := newTokenServer(t, real.refresh, next)
	l := openLogin(t, path)
	out, _ := l.Render()
	g := tokensOf(readAuth(t, out))
	body := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {g.refresh}}.Encode()
	r, err := l.Refresh(context.Background(), "application/x-www-form-urlencoded", []byte(body), ts.upstream())
	if err != nil || r.Status != 200 {
		t.Fatalf("form refresh: %v %+v", err, r)
	}
	if !strings.Contains(ts.gotBody[0], "refresh_token="+url.QueryEscape(real.refresh)) {
		t.Errorf("the token endpoint got %s: want the real refresh token in the form", ts.gotBody[0])
	}
}

func TestRefreshFailureMasked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.json")
	real := newLogin(t, 1)
	writeAuth(t, path, real)
	ts := newTokenServer(t, "something-else-entirely", newLogin(t, 2))
	l := openLogin(t, path)
	out, _ := l.Render()
	g := tokensOf(readAuth(t, out))
	r, err := l.Refresh(context.Background(), "application/json", refreshBody(g.refresh), ts.upstream())
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 401 {
		t.Fatalf("status %d: want the endpoint's 401 passed on", r.Status)
	}
	if bytes.Contains(r.Body, []byte(real.refresh)) || !bytes.Contains(r.Body, []byte(g.refresh)) {
		t.Errorf("the endpoint's echo of the real refresh token reached the guest unmasked: %s", r.Body)
	}
	data, _ := os.ReadFile(path)
	if tokensOf(readAuth(t, data)) != real {
		t.Errorf("a failed refresh changed the host's file")
	}
}

func TestConcurrentRefreshersCallUpstreamOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.json")
	real, next := newLogin(t, 1), newLogin(t, 2)
	writeAuth(t, path, real)
	ts := newTokenServer(t, real.refresh, next)
	// Two sandboxes share the login: two Logins on one file, each with
	// its own guest copy.
	var ls []*Login
	var phs []string
	for i := 0; i < 2; i++ {
		l := openLogin(t, path)
		out, _ := l.Render()
		ls = append(ls, l)
		phs = append(phs, tokensOf(readAuth(t, out)).refresh)
	}
	var wg sync.WaitGroup
	replies := make([]*Reply, 2)
	errs := make([]error, 2)
	for i := range ls {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			replies[i], errs[i] = ls[i].Refresh(context.Background(), "application/json", refreshBody(phs[i]), ts.upstream())
		}(i)
	}
	wg.Wait()
	if n := ts.calls.Load(); n != 1 {
		for i, r := range replies {
			if r != nil {
				t.Logf("refresher %d: %v status %d upstream %v", i, errs[i], r.Status, r.Upstream)
			}
		}
		t.Fatalf("the token endpoint was called %d times: want once for one login", n)
	}
	ups := 0
	for i, r := range replies {
		if errs[i] != nil || r.Status != 200 {
			t.Fatalf("refresher %d: %v %+v", i, errs[i], r)
		}
		if r.Upstream {
			ups++
		}
		var resp map[string]string
		json.Unmarshal(r.Body, &resp)
		if v, ok := ls[i].AccessToken(resp["access_token"]); !ok || v != next.access {
			t.Errorf("refresher %d: its new access placeholder does not give the rotated access token", i)
		}
		if bytes.Contains(r.Body, []byte(next.refresh)) || bytes.Contains(r.Body, []byte(next.access)) {
			t.Errorf("refresher %d got a real token: %s", i, r.Body)
		}
	}
	if ups != 1 {
		t.Errorf("%d replies came from upstream: want 1, the other from the file", ups)
	}
}

func TestRefreshUnknownPlaceholderRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.json")
	real := newLogin(t, 1)
	writeAuth(t, path, real)
	ts := newTokenServer(t, real.refresh, newLogin(t, 2))
	l := openLogin(t, path)
	out, _ := l.Render()
	g := tokensOf(readAuth(t, out))
	other := openLogin(t, path)
	otherOut, _ := other.Render()
	for name, body := range map[string][]byte{
		"another sandbox's placeholder": refreshBody(tokensOf(readAuth(t, otherOut)).refresh),
		"made-up placeholder":           refreshBody("sbx_ph_codex_refresh_00000000000000000000000000000000"),
		"the real refresh token":        refreshBody(real.refresh),
		"the access placeholder":        refreshBody(g.access),
		"no refresh field":              []byte(`{"grant_type":"refresh_token"}`),
		"placeholder twice":             []byte(`{"grant_type":"refresh_token","refresh_token":"` + g.refresh + `","x":"` + g.refresh + `"}`),
	} {
		r, err := l.Refresh(context.Background(), "application/json", body, ts.upstream())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Status != 403 || r.Refused == "" || r.Upstream {
			t.Errorf("%s: status %d refused %q upstream %v: want a 403 without calling upstream", name, r.Status, r.Refused, r.Upstream)
		}
		if bytes.Contains(r.Body, []byte(real.refresh)) || strings.Contains(r.Refused, real.refresh) {
			t.Errorf("%s: the refusal quotes the real refresh token", name)
		}
	}
	if n := ts.calls.Load(); n != 0 {
		t.Errorf("the token endpoint was called %d times for refused refreshes", n)
	}
}

func TestErrorsCarryNoToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.json")
	real := newLogin(t, 1)
	os.WriteFile(path, []byte(`{"tokens":{"access_token":"`+real.access+`","refresh_token":5}}`), 0o600)
	_, err := Open("codex", codexSpec, path, Options{})
	if err == nil || strings.Contains(err.Error(), real.access) {
		t.Fatalf("Open of a malformed file: %v", err)
	}
	os.WriteFile(path, []byte(`{"tokens":{"access_token":"`+real.access+`"`), 0o600)
	_, err = Open("codex", codexSpec, path, Options{})
	if err == nil || strings.Contains(err.Error(), real.access) {
		t.Fatalf("Open of a truncated file: %v", err)
	}
}

func TestRefreshIfDue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.json")
	real, next := newLogin(t, 1), newLogin(t, 2)
	writeAuth(t, path, real)
	ts := newTokenServer(t, real.refresh, next)
	now := time.Now()
	l, err := Open("codex", codexSpec, path, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if did, err := l.RefreshIfDue(context.Background(), ts.upstream()); did || err != nil {
		t.Fatalf("an hour before expiry: refreshed %v, %v", did, err)
	}
	now = now.Add(58 * time.Minute)
	if did, err := l.RefreshIfDue(context.Background(), ts.upstream()); !did || err != nil {
		t.Fatalf("two minutes before expiry: refreshed %v, %v", did, err)
	}
	data, _ := os.ReadFile(path)
	if tokensOf(readAuth(t, data)) != next {
		t.Errorf("the host's own refresh did not rotate the file")
	}
}
