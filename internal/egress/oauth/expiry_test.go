package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/policy"
)

// claudeSpec is Claude Code's ~/.claude/.credentials.json: opaque
// tokens, the access token's expiry in milliseconds.
var claudeSpec = policy.OAuth{
	TokenURL:      "https://platform.claude.com/v1/oauth/token",
	RefreshField:  "refresh_token",
	ClientID:      "9d1c250a-e61b-44d9-88ed-5944d1962f5e",
	AccessToken:   "claudeAiOauth.accessToken",
	RefreshToken:  "claudeAiOauth.refreshToken",
	ExpiresAt:     "claudeAiOauth.expiresAt",
	ExpiresAtUnit: policy.UnixMilliseconds,
}

func claudeTokens(gen int) login {
	return login{
		access:  fmt.Sprintf("sk-ant-oat01-real-access-%d-%s", gen, strings.Repeat("a", 30)),
		refresh: fmt.Sprintf("sk-ant-ort01-real-refresh-%d-%s", gen, strings.Repeat("r", 30)),
	}
}

// writeClaude writes a Claude-shaped credentials file holding lg that
// expires at exp (milliseconds, as Claude Code writes it).
func writeClaude(t *testing.T, path string, lg login, exp time.Time) {
	t.Helper()
	data := fmt.Sprintf(`{"claudeAiOauth":{"accessToken":%q,"refreshToken":%q,"expiresAt":%d,"scopes":["user:inference","user:profile"],"subscriptionType":"max"}}`,
		lg.access, lg.refresh, exp.UnixMilli())
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// claudeFile is what a test reads back of a credentials file: the
// tokens, and expiresAt as the digits written.
type claudeFile struct {
	Login struct {
		Access    string      `json:"accessToken"`
		Refresh   string      `json:"refreshToken"`
		ExpiresAt json.Number `json:"expiresAt"`
		Scopes    []string    `json:"scopes"`
		Sub       string      `json:"subscriptionType"`
	} `json:"claudeAiOauth"`
}

func readClaude(t *testing.T, data []byte) claudeFile {
	t.Helper()
	var f claudeFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("credentials file: %v\n%s", err, data)
	}
	return f
}

// claudeEndpoint is a token endpoint over real TLS answering as
// platform.claude.com's: the rotated tokens and expires_in seconds.
type claudeEndpoint struct {
	srv       *httptest.Server
	want      string
	next      login
	expiresIn int
	mu        sync.Mutex
	got       []map[string]any
}

func newClaudeEndpoint(t *testing.T, want string, next login, expiresIn int) *claudeEndpoint {
	e := &claudeEndpoint{want: want, next: next, expiresIn: expiresIn}
	e.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &m)
		e.mu.Lock()
		e.got = append(e.got, m)
		e.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if m["refresh_token"] != e.want {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"invalid_grant"}`)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"token_type": "Bearer", "access_token": e.next.access,
			"refresh_token": e.next.refresh, "expires_in": e.expiresIn, "scope": "user:inference user:profile"})
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *claudeEndpoint) upstream() Upstream {
	return func(ctx context.Context, ct string, body []byte) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", e.srv.URL+"/v1/oauth/token", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Accept-Encoding", "identity")
		return e.srv.Client().Do(req)
	}
}

func (e *claudeEndpoint) calls() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.got)
}

// The guest's copy holds placeholders for the opaque tokens and the
// host's expiry, digit for digit: the client refreshes when the host's
// token expires.
func TestRenderKeepsExpiry(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".credentials.json")
	real := claudeTokens(1)
	exp := time.UnixMilli(1796330014121)
	writeClaude(t, path, real, exp)
	l, err := Open("claude", claudeSpec, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := l.Render()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte(real.access)) || bytes.Contains(out, []byte(real.refresh)) {
		t.Fatalf("the guest's copy holds a real token:\n%s", out)
	}
	g := readClaude(t, out)
	if !strings.HasPrefix(g.Login.Access, "sbx_ph_claude_access_") || !strings.HasPrefix(g.Login.Refresh, "sbx_ph_claude_refresh_") {
		t.Errorf("the guest's tokens are not placeholders: %s", out)
	}
	if g.Login.ExpiresAt != "1796330014121" {
		t.Errorf("the guest's expiresAt is %s: want the host's 1796330014121", g.Login.ExpiresAt)
	}
	if g.Login.Sub != "max" || len(g.Login.Scopes) != 2 {
		t.Errorf("render changed fields that are not tokens: %s", out)
	}
	if v, ok := l.AccessToken(g.Login.Access); !ok || v != real.access {
		t.Errorf("the access placeholder does not stand for the real access token")
	}
}

// A brokered refresh writes the new expiry (now + expires_in, in the
// spec's unit) beside the rotated tokens, atomically, and the guest
// gets new placeholders and the same expires_in.
func TestRefreshWritesExpiry(t *testing.T) {
	for _, unit := range []string{policy.UnixMilliseconds, policy.UnixSeconds} {
		t.Run(unit, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, ".credentials.json")
			real, next := claudeTokens(1), claudeTokens(2)
			now := time.UnixMilli(1796300000123)
			writeClaude(t, path, real, now.Add(-time.Minute))
			spec := claudeSpec
			spec.ExpiresAtUnit = unit
			l, err := Open("claude", spec, path, Options{Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			out, _ := l.Render()
			g := readClaude(t, out)
			e := newClaudeEndpoint(t, real.refresh, next, 28800)
			body := fmt.Sprintf(`{"grant_type":"refresh_token","refresh_token":%q,"client_id":%q,"scope":"user:inference user:profile"}`, g.Login.Refresh, claudeSpec.ClientID)
			r, err := l.Refresh(context.Background(), "application/json", []byte(body), e.upstream())
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != 200 || !r.Upstream || r.WriteBack != nil {
				t.Fatalf("refresh: %d upstream=%v write-back %v: %s", r.Status, r.Upstream, r.WriteBack, r.Body)
			}
			if e.got[0]["refresh_token"] != real.refresh || e.got[0]["scope"] != "user:inference user:profile" {
				t.Errorf("the token endpoint got %v: want the guest's body with the real refresh token", e.got[0]["scope"])
			}
			data, _ := os.ReadFile(path)
			host := readClaude(t, data)
			if host.Login.Access != next.access || host.Login.Refresh != next.refresh {
				t.Errorf("the host's file does not hold the rotated tokens")
			}
			want := fmt.Sprint(now.Add(8 * time.Hour).UnixMilli())
			if unit == policy.UnixSeconds {
				want = fmt.Sprint(now.Add(8 * time.Hour).Unix())
			}
			if string(host.Login.ExpiresAt) != want {
				t.Errorf("the host's expiresAt is %s: want %s (now + expires_in)", host.Login.ExpiresAt, want)
			}
			if host.Login.Sub != "max" || len(host.Login.Scopes) != 2 {
				t.Errorf("the write-back lost fields: %s", data)
			}
			if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
				t.Errorf("the host's file is %v after the write-back", fi.Mode())
			}
			if ents, _ := filepath.Glob(filepath.Join(dir, ".*.sbx-*")); len(ents) != 1 || !strings.HasSuffix(ents[0], ".sbx-lock") {
				t.Errorf("left beside the file: %v (want the lock file only)", ents)
			}
			var reply map[string]any
			json.Unmarshal(r.Body, &reply)
			if reply["expires_in"] != float64(28800) {
				t.Errorf("the guest's reply has expires_in %v: want the endpoint's", reply["expires_in"])
			}
			for _, k := range []string{"access_token", "refresh_token"} {
				if s, _ := reply[k].(string); !strings.HasPrefix(s, "sbx_ph_claude_") {
					t.Errorf("the guest's %s is not a placeholder", k)
				}
			}
			if bytes.Contains(r.Body, []byte(next.access)) || bytes.Contains(r.Body, []byte(next.refresh)) {
				t.Errorf("the guest's reply holds a real token: %s", r.Body)
			}
		})
	}
}

// A second sandbox sharing the login, refreshing with a placeholder of
// the tokens rotated since, is answered from the file with the time
// left until the file's expiry and the scope it asked for: upstream is
// called once.
func TestRefreshFromFileGivesExpiry(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".credentials.json")
	real, next := claudeTokens(1), claudeTokens(2)
	now := time.Now()
	clock := func() time.Time { return now }
	writeClaude(t, path, real, now.Add(-time.Minute))
	e := newClaudeEndpoint(t, real.refresh, next, 3600)
	var guests []claudeFile
	var logins []*Login
	for range 2 {
		l, err := Open("claude", claudeSpec, path, Options{Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		out, _ := l.Render()
		logins, guests = append(logins, l), append(guests, readClaude(t, out))
	}
	var replies []map[string]any
	for i, l := range logins {
		body := fmt.Sprintf(`{"grant_type":"refresh_token","refresh_token":%q,"client_id":%q,"scope":"user:inference user:profile"}`, guests[i].Login.Refresh, claudeSpec.ClientID)
		r, err := l.Refresh(context.Background(), "application/json", []byte(body), e.upstream())
		if err != nil || r.Status != 200 {
			t.Fatalf("refresh %d: %v %+v", i, err, r)
		}
		var m map[string]any
		json.Unmarshal(r.Body, &m)
		replies = append(replies, m)
		now = now.Add(10 * time.Minute)
	}
	if e.calls() != 1 {
		t.Errorf("the token endpoint was called %d times: want once for a shared login", e.calls())
	}
	if replies[1]["expires_in"] != float64(3600-600) {
		t.Errorf("the second sandbox's reply has expires_in %v: want the 3000 s left of the file's expiry", replies[1]["expires_in"])
	}
	if replies[1]["scope"] != "user:inference user:profile" {
		t.Errorf("the second sandbox's reply has scope %v: want the scope it asked for", replies[1]["scope"])
	}
	if v, ok := logins[1].AccessToken(replies[1]["access_token"].(string)); !ok || v != next.access {
		t.Errorf("the second sandbox's new access placeholder does not stand for the rotated token")
	}
}

// The host refreshes a login of opaque tokens by itself by the file's
// expiry; without expires_at it cannot know when, and does not.
func TestRefreshIfDueByFileExpiry(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".credentials.json")
	real, next := claudeTokens(1), claudeTokens(2)
	now := time.Now()
	writeClaude(t, path, real, now.Add(time.Hour))
	e := newClaudeEndpoint(t, real.refresh, next, 3600)
	clock := func() time.Time { return now }

	blind := claudeSpec
	blind.ExpiresAt, blind.ExpiresAtUnit = "", ""
	lb, err := Open("claude", blind, path, Options{Now: func() time.Time { return now.Add(2 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if did, err := lb.RefreshIfDue(context.Background(), e.upstream()); did || err != nil {
		t.Fatalf("without expires_at: refreshed %v, %v", did, err)
	}

	l, err := Open("claude", claudeSpec, path, Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if did, err := l.RefreshIfDue(context.Background(), e.upstream()); did || err != nil {
		t.Fatalf("an hour before expiry: refreshed %v, %v", did, err)
	}
	now = now.Add(58 * time.Minute)
	if did, err := l.RefreshIfDue(context.Background(), e.upstream()); !did || err != nil {
		t.Fatalf("two minutes before expiry: refreshed %v, %v", did, err)
	}
	if e.got[0]["refresh_token"] != real.refresh || e.got[0]["client_id"] != claudeSpec.ClientID {
		t.Errorf("the host's refresh sent %v", e.got[0]["client_id"])
	}
	data, _ := os.ReadFile(path)
	host := readClaude(t, data)
	if host.Login.Access != next.access || host.Login.Refresh != next.refresh ||
		string(host.Login.ExpiresAt) != fmt.Sprint(now.Add(time.Hour).UnixMilli()) {
		t.Errorf("the host's own refresh wrote %s", data)
	}
	// Refreshed: not due again until the new expiry nears.
	if did, err := l.RefreshIfDue(context.Background(), e.upstream()); did || err != nil || e.calls() != 1 {
		t.Errorf("right after its refresh: refreshed %v, %v (%d calls)", did, err, e.calls())
	}
}

// An expires_at that is not a number is an error naming the path, not
// the file's content.
func TestExpiresAtNotANumber(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".credentials.json")
	real := claudeTokens(1)
	os.WriteFile(path, []byte(fmt.Sprintf(`{"claudeAiOauth":{"accessToken":%q,"refreshToken":%q,"expiresAt":"soon"}}`, real.access, real.refresh)), 0o600)
	_, err := Open("claude", claudeSpec, path, Options{})
	if err == nil || !strings.Contains(err.Error(), "claudeAiOauth.expiresAt is not a number") || strings.Contains(err.Error(), real.access) {
		t.Fatalf("Open: %v", err)
	}
}
