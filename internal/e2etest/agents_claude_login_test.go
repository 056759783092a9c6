//go:build linux

package e2etest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx"
	"github.com/sbx-dev/sbx/internal/atomicfile"
	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/fetch"
	"github.com/sbx-dev/sbx/internal/egress"
	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/internal/egress/oauth"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/policy"
)

// claudeVersion is the Claude Code release examples/agent-debian pins.
const claudeVersion = "2.1.332"

// claudeSpec is a spec with Claude Code's glibc executable as its only
// input, for the lock to pin the npm tarball and the fetcher to bring
// it into the cache, as the agent image's build does.
const claudeSpec = `image "claude" {
  platform = "linux/amd64"

  artifact "claude" {
    source = "npm:@anthropic-ai/claude-code-linux-x64@` + claudeVersion + `"
    file   = "package/claude"
    dest   = "/usr/local/bin/claude"
    mode   = "0755"
  }
}
`

// claudeExecutable returns the path of the real claude executable of
// claudeVersion for this host.
func claudeExecutable(ctx context.Context, t *testing.T) string {
	return npmExecutable(ctx, t, "claude", claudeSpec, "package/claude")
}

// npmExecutable returns the path of the executable member of the npm
// tarball that the spec's image name and its artifact name bring, as
// the agent image's build brings it: locked from the npm registry the
// host's npm configuration names, fetched into sbx's default cache
// (where the VM tests' builds find it too). The lock and the unpacked
// executable are kept in the per-user cache's sbx-test/NAME, so that a
// second run touches no network and unpacks nothing. (codexExecutable
// is the same for codex.)
func npmExecutable(ctx context.Context, t *testing.T, name, spec, member string) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(base, "sbx-test", name)
	if err := os.MkdirAll(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	cacheRoot, err := cache.DefaultRoot()
	if err != nil {
		t.Fatal(err)
	}
	cfgDir := t.TempDir()
	files := map[string][]byte{"sbx.hcl": []byte(spec)}
	if prev, err := os.ReadFile(filepath.Join(keep, lockfiles.FileName)); err == nil {
		files[lockfiles.FileName] = prev
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(cfgDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := withEnv(environ, cache.EnvRoot+"="+cacheRoot)
	cfg, err := sbx.Load(cfgDir, sbx.Options{Environ: env})
	if err != nil {
		t.Fatal(err)
	}
	locked, err := cfg.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lock, diags := lockfiles.Read(locked.Path)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if data, err := os.ReadFile(filepath.Join(cfgDir, lockfiles.FileName)); err == nil {
		if err := atomicfile.WriteBytes(filepath.Join(keep, lockfiles.FileName), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := cache.Open(cacheRoot)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fetch.Inputs(ctx, cfg.Lang.Images[name], lock.Images[name], c, fetch.Options{Dir: cfgDir, Environ: env})
	if err != nil {
		t.Fatal(err)
	}
	blob := got["artifact."+name].File
	if blob == nil {
		t.Fatalf("the cache holds no tarball for artifact.%s: %+v", name, got)
	}
	exe := filepath.Join(keep, strings.TrimPrefix(blob.Digest, "sha256:"), name)
	if _, err := os.Stat(exe); err == nil {
		return exe
	}
	if err := unpackFile(blob.Path, member, exe); err != nil {
		t.Fatal(err)
	}
	return exe
}

// claudeLogin is the login spec of Claude Code's
// ~/.claude/.credentials.json (docs/agents.md).
var claudeLogin = policy.OAuth{
	TokenURL:      "https://platform.claude.com/v1/oauth/token",
	RefreshField:  "refresh_token",
	ClientID:      "9d1c250a-e61b-44d9-88ed-5944d1962f5e",
	AccessToken:   "claudeAiOauth.accessToken",
	RefreshToken:  "claudeAiOauth.refreshToken",
	ExpiresAt:     "claudeAiOauth.expiresAt",
	ExpiresAtUnit: policy.UnixMilliseconds,
}

// claudeTokens is one generation of a Claude login's tokens: opaque
// strings shaped as the real ones.
type claudeTokens struct {
	access, refresh string
}

func claudeGeneration(gen int) claudeTokens {
	return claudeTokens{
		access:  fmt.Sprintf("sk-ant-oat01-real-access-token-of-generation-%03d-%s", gen, strings.Repeat("a", 40)),
		refresh: fmt.Sprintf("sk-ant-ort01-real-refresh-token-of-generation-%03d-%s", gen, strings.Repeat("r", 40)),
	}
}

// claudeScopes are the scopes of a Claude subscription login.
var claudeScopes = []string{"user:inference", "user:profile", "user:sessions:claude_code"}

// claudeCredentialsFile is ~/.claude/.credentials.json as Claude Code
// writes it after a login with a Claude subscription.
func claudeCredentialsFile(tk claudeTokens, expires time.Time) []byte {
	data, _ := json.MarshalIndent(map[string]any{"claudeAiOauth": map[string]any{
		"accessToken": tk.access, "refreshToken": tk.refresh, "expiresAt": expires.UnixMilli(),
		"scopes": claudeScopes, "subscriptionType": "max", "rateLimitTier": "default_claude_max_20x",
	}}, "", "  ")
	return data
}

// claudeExpiresAt reads the expiresAt of a credentials file.
func claudeExpiresAt(t *testing.T, path string) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Login struct {
			ExpiresAt int64 `json:"expiresAt"`
		} `json:"claudeAiOauth"`
	}
	if err := json.Unmarshal(data, &f); err != nil || f.Login.ExpiresAt == 0 {
		t.Fatalf("%s has no claudeAiOauth.expiresAt: %v", path, err)
	}
	return f.Login.ExpiresAt
}

// claudeTokenLife is the expires_in the fake token endpoint answers.
const claudeTokenLife = 8 * time.Hour

// claudeFake is api.anthropic.com and platform.claude.com's token
// endpoint. The Messages API takes the login's current access token
// only, and not once it expired (401, as the real one answers), and is
// otherwise fakeAnthropic; the token endpoint takes the current refresh
// token only and rotates both tokens.
type claudeFake struct {
	api *fakeAnthropic

	mu      sync.Mutex
	cur     claudeTokens
	expired bool // the current access token has expired
	gen     int
	token   []map[string]any // the bodies the token endpoint got
	reqs    []string
}

func (f *claudeFake) current() claudeTokens {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}

func (f *claudeFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	auth := r.Header.Get("Authorization")
	f.mu.Lock()
	cur, valid := f.cur, !f.expired
	f.reqs = append(f.reqs, fmt.Sprintf("%s %s %s%s current-token=%v", r.Proto, r.Method, host, r.URL.RequestURI(), auth == "Bearer "+cur.access && valid))
	f.mu.Unlock()
	switch {
	case host == "platform.claude.com" && r.URL.Path == "/v1/oauth/token" && r.Method == http.MethodPost:
		f.refresh(w, r)
	case host == "api.anthropic.com" && r.URL.Path == "/v1/messages":
		if auth != "Bearer "+cur.access || !valid {
			apiError(w, http.StatusUnauthorized, "authentication_error", "OAuth token has expired or is not valid.")
			return
		}
		r2 := r.Clone(r.Context())
		r2.Header.Set("Authorization", "Bearer "+f.api.Bearer)
		f.api.ServeHTTP(w, r2)
	default:
		apiError(w, http.StatusNotFound, "not_found_error", "fake: not here")
	}
}

func (f *claudeFake) refresh(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	json.Unmarshal(body, &req)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.token = append(f.token, req)
	w.Header().Set("Content-Type", "application/json")
	if req["refresh_token"] != f.cur.refresh || req["grant_type"] != "refresh_token" || req["client_id"] != claudeLogin.ClientID {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":"invalid_grant","error_description":"Refresh token not found or invalid"}`)
		return
	}
	f.gen++
	f.cur, f.expired = claudeGeneration(f.gen), false
	json.NewEncoder(w).Encode(map[string]any{"token_type": "Bearer", "access_token": f.cur.access, "refresh_token": f.cur.refresh,
		"expires_in": int(claudeTokenLife / time.Second), "scope": strings.Join(claudeScopes, " "),
		"organization": map[string]string{"uuid": "org-test-1", "name": "Test"},
		"account":      map[string]string{"uuid": "acct-test-1", "email_address": "user@example.com"}})
}

// TestClaudeLoginThroughEngine runs the real claude binary on this host
// with a Claude subscription login (~/.claude/.credentials.json)
// through the egress engine (a CONNECT proxy whose tunnels are the
// engine's flows, claude in a network namespace of its own) against
// fake api.anthropic.com and platform.claude.com: claude holds the
// guest's copy of the credentials file, both tokens placeholders and the
// expiry the host's, and the host its real file. A `claude -p` turn
// reaches the Messages API with the real access token; then, with the
// host's login expired, claude refreshes on its own (it reads the
// copy's expiresAt), the token endpoint gets the real refresh token
// once, the host's file gets the rotated tokens and the expiry the
// response's expires_in gives, and the API gets the new access token.
// Nothing under claude's home and nothing it printed holds a real token.
func TestClaudeLoginThroughEngine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	exe := claudeExecutable(ctx, t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is needed to run claude without a network: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	caPEM, cert := testPKI(t, "api.anthropic.com", "platform.claude.com")
	work := t.TempDir()
	fake := &claudeFake{gen: 1, cur: claudeGeneration(1), api: &fakeAnthropic{
		Bearer: "fake-internal-credential-of-the-api", Path: filepath.Join(work, "note.txt"), Content: "from claude",
		Final: "Wrote note.txt for sbx."}}
	srv := httptest.NewUnstartedServer(fake)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	addr := srv.Listener.Addr().String()

	hostFile := filepath.Join(t.TempDir(), ".credentials.json")
	if err := os.WriteFile(hostFile, claudeCredentialsFile(fake.current(), time.Now().Add(claudeTokenLife)), 0o600); err != nil {
		t.Fatal(err)
	}
	rule := policy.Origin{Block: "egress.anthropic", File: "main.hcl", Line: 2}
	pol := policy.Sandbox{
		Allow: []policy.AllowRule{
			{Pattern: policy.MustHostPattern("api.anthropic.com"), Origin: rule},
			{Pattern: policy.MustHostPattern("platform.claude.com"), Origin: rule},
		},
		Hosts: []policy.HostMapping{{Name: "api.anthropic.com", Addr: addr}, {Name: "platform.claude.com", Addr: addr}},
		CAs:   []policy.CA{{Path: "upstream-ca.pem", PEM: string(caPEM)}},
		Secrets: []policy.SecretBinding{{Name: "claude_login", Env: "SBX_CLAUDE_ACCESS", Source: "file:" + hostFile,
			Hosts: []policy.HostPattern{policy.MustHostPattern("api.anthropic.com")}, OAuth: &claudeLogin,
			File:   &policy.SecretFile{Path: "/home/agent/.claude/.credentials.json", Mode: 0o600, Owner: "agent"},
			Origin: policy.Origin{Block: "secret.claude_login", File: "main.hcl", Line: 1}}},
	}
	authority, err := ca.New()
	if err != nil {
		t.Fatal(err)
	}
	auditDir := t.TempDir()
	aud, err := audit.Open(auditDir, audit.Options{Sandbox: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	defer aud.Close()

	// Each sandbox's guest is a home of its own under homes.
	homes := t.TempDir()
	home := filepath.Join(homes, "a")
	guestCA := filepath.Join(t.TempDir(), "sbx-ca.pem")
	if err := os.WriteFile(guestCA, authority.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}

	// start opens the login as a sandbox's start does and writes the
	// guest's copy, rendered from the host's file, under home.
	start := func(t *testing.T, home string) *oauth.Login {
		login, err := oauth.Open("claude_login", claudeLogin, hostFile, oauth.Options{})
		if err != nil {
			t.Fatal(err)
		}
		guestFile, err := login.Render()
		if err != nil {
			t.Fatal(err)
		}
		guestPath := filepath.Join(home, ".claude", ".credentials.json")
		if err := os.MkdirAll(filepath.Dir(guestPath), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(guestPath, guestFile, 0o600); err != nil {
			t.Fatal(err)
		}
		// The copy expires when the host's login does: claude refreshes
		// by it.
		if h, g := claudeExpiresAt(t, hostFile), claudeExpiresAt(t, guestPath); h != g {
			t.Errorf("the guest's copy has expiresAt %d, the host's file %d", g, h)
		}
		return login
	}
	// run runs one claude -p with its home at home through a new engine
	// brokering login, and returns claude's output.
	var outputs []string
	run := func(t *testing.T, login *oauth.Login, home string) string {
		claudeHome := filepath.Join(home, ".claude")
		cp, err := egress.CompileLogins(pol, nil, nil, map[string]*oauth.Login{"claude_login": login})
		if err != nil {
			t.Fatal(err)
		}
		eng, err := egress.NewEngine(cp, egress.Options{CA: authority, Audit: aud})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		sock := engineProxy(t, eng)
		os.Remove(fake.api.Path)
		rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(rctx, unshare, "--user", "--map-root-user", "--net", "--", self,
			exe, "-p", "Write note.txt, then say what you did.", "--allowedTools", "Write", "--output-format", "text",
			"--debug-file", filepath.Join(home, "debug.log"))
		cmd.Dir = work
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CLAUDE_CONFIG_DIR=" + claudeHome,
			"SBX_CLAUDE_ACCESS=" + login.AccessPlaceholder(), "NODE_EXTRA_CA_CERTS=" + guestCA, "SSL_CERT_FILE=" + guestCA, codexRelayEnv + "=" + sock}
		cmd.WaitDelay = 5 * time.Second
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		err = cmd.Run()
		outputs = append(outputs, out.String())
		fake.mu.Lock()
		reqs := fake.reqs
		fake.reqs = nil
		fake.mu.Unlock()
		t.Logf("claude: %v; the fake got:\n%s", err, strings.Join(reqs, "\n"))
		if err != nil {
			aud.Close()
			dumpAudit(t, auditDir)
			if b, err := os.ReadFile(filepath.Join(home, "debug.log")); err == nil {
				t.Logf("claude's debug log:\n%s", b)
			}
			t.Fatalf("claude -p: %v\n%s", err, out.String())
		}
		// Every request that reached the Messages API carried the
		// login's current real access token.
		messages := 0
		for _, r := range reqs {
			if strings.Contains(r, " api.anthropic.com/v1/messages") {
				messages++
				if !strings.HasSuffix(r, "current-token=true") {
					t.Errorf("a request reached the Messages API without the current real access token: %s", r)
				}
			}
		}
		if messages == 0 {
			t.Errorf("claude sent nothing to the Messages API")
		}
		if got, err := os.ReadFile(fake.api.Path); err != nil || string(got) != fake.api.Content {
			t.Errorf("note.txt: %q, %v\n%s", got, err, out.String())
		}
		if !strings.Contains(out.String(), fake.api.Final) {
			t.Errorf("claude's output lacks the final message:\n%s", out.String())
		}
		return out.String()
	}

	t.Run("turn", func(t *testing.T) {
		run(t, start(t, home), home)
		if len(fake.token) != 0 {
			t.Errorf("claude refreshed a login that had not expired: %v", fake.token)
		}
	})
	if t.Failed() {
		return
	}
	t.Run("expired login", func(t *testing.T) {
		// The host's login expired: its file's expiresAt has passed and
		// the API refuses its access token. Claude reads the expiry from
		// its copy and refreshes before its turn.
		fake.mu.Lock()
		fake.expired = true
		expired := fake.cur
		fake.mu.Unlock()
		if err := os.WriteFile(hostFile, claudeCredentialsFile(expired, time.Now().Add(-time.Hour)), 0o600); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		run(t, start(t, home), home)
		fake.mu.Lock()
		bodies, rotated := append([]map[string]any(nil), fake.token...), fake.cur
		fake.mu.Unlock()
		for _, b := range bodies {
			t.Logf("the token endpoint got grant_type %v, client_id %v, scope %q, the real refresh token: %v",
				b["grant_type"], b["client_id"], b["scope"], b["refresh_token"] == expired.refresh)
		}
		if len(bodies) != 1 || bodies[0]["refresh_token"] != expired.refresh {
			t.Errorf("the token endpoint got %d refreshes: want one, with the real refresh token", len(bodies))
		}
		data, err := os.ReadFile(hostFile)
		if err != nil {
			t.Fatal(err)
		}
		var host struct {
			Login struct {
				Access    string   `json:"accessToken"`
				Refresh   string   `json:"refreshToken"`
				ExpiresAt float64  `json:"expiresAt"`
				Scopes    []string `json:"scopes"`
				Sub       string   `json:"subscriptionType"`
			} `json:"claudeAiOauth"`
		}
		json.Unmarshal(data, &host)
		if host.Login.Access != rotated.access || host.Login.Refresh != rotated.refresh {
			t.Errorf("the host's credentials file does not hold the rotated tokens")
		}
		want := t0.Add(claudeTokenLife).UnixMilli()
		if d := math.Abs(host.Login.ExpiresAt - float64(want)); d > float64(3*time.Minute/time.Millisecond) {
			t.Errorf("the host's expiresAt is %.0f, %.0f ms from the %d the response's expires_in gives", host.Login.ExpiresAt, d, want)
		}
		if host.Login.Sub != "max" || len(host.Login.Scopes) != len(claudeScopes) {
			t.Errorf("the host's credentials file lost its other fields:\n%s", data)
		}
		if fi, err := os.Stat(hostFile); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("the host's credentials file: %v %v", fi.Mode(), err)
		}
		// Claude wrote its copy with the expiry it computed from the
		// same expires_in: the two agree to within the run.
		if g := claudeExpiresAt(t, filepath.Join(home, ".claude", ".credentials.json")); math.Abs(float64(g)-host.Login.ExpiresAt) > float64(time.Minute/time.Millisecond) {
			t.Errorf("claude's copy expires at %d, the host's login at %.0f", g, host.Login.ExpiresAt)
		}
	})

	t.Run("shared login", func(t *testing.T) {
		// Two sandboxes start on one login that has expired, each with
		// its copy: the first refreshes through the token endpoint, the
		// second's refresh (its placeholder stands for the refresh
		// token the first rotated) is answered from the host's file.
		fake.mu.Lock()
		fake.expired = true
		expired, before := fake.cur, len(fake.token)
		fake.mu.Unlock()
		if err := os.WriteFile(hostFile, claudeCredentialsFile(expired, time.Now().Add(-time.Hour)), 0o600); err != nil {
			t.Fatal(err)
		}
		second := filepath.Join(homes, "b")
		la, lb := start(t, home), start(t, second)
		run(t, la, home)
		run(t, lb, second)
		fake.mu.Lock()
		refreshes := len(fake.token) - before
		fake.mu.Unlock()
		if refreshes != 1 {
			t.Errorf("two sandboxes on one expired login made %d refreshes at the token endpoint: want one", refreshes)
		}
		// The second claude took the answer from the file as a login:
		// its rewritten copy keeps the scopes it asked for and the
		// host's expiry.
		var g struct {
			Login struct {
				ExpiresAt float64  `json:"expiresAt"`
				Scopes    []string `json:"scopes"`
			} `json:"claudeAiOauth"`
		}
		data, _ := os.ReadFile(filepath.Join(second, ".claude", ".credentials.json"))
		json.Unmarshal(data, &g)
		if !slices.Contains(g.Login.Scopes, "user:inference") {
			t.Errorf("the second claude's copy has scopes %q", g.Login.Scopes)
		}
		if h := claudeExpiresAt(t, hostFile); math.Abs(g.Login.ExpiresAt-float64(h)) > float64(time.Minute/time.Millisecond) {
			t.Errorf("the second claude's copy expires at %.0f, the host's login at %d", g.Login.ExpiresAt, h)
		}
	})

	// Nothing claude holds or printed has a real token: its credentials
	// file (which it rewrote after the refresh), every file under its
	// home, and its output.
	guest, err := os.ReadFile(filepath.Join(home, ".claude", ".credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("claude's .credentials.json at the end:\n%s", guest)
	texts := map[string]string{"claude's output": strings.Join(outputs, "\n")}
	filepath.Walk(homes, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if b, err := os.ReadFile(p); err == nil {
				texts[p] = string(b)
			}
		}
		return nil
	})
	fake.mu.Lock()
	var all []claudeTokens
	for gen := 1; gen <= fake.gen; gen++ {
		all = append(all, claudeGeneration(gen))
	}
	fake.mu.Unlock()
	for gen, tk := range all {
		for kind, v := range map[string]string{"access token": tk.access, "refresh token": tk.refresh} {
			for where, text := range texts {
				if strings.Contains(text, v) {
					t.Errorf("the real %s (generation %d) is in %s", kind, gen+1, where)
				}
			}
		}
	}
	var g struct {
		Login map[string]any `json:"claudeAiOauth"`
	}
	json.Unmarshal(guest, &g)
	for _, k := range []string{"accessToken", "refreshToken"} {
		if s, _ := g.Login[k].(string); !strings.HasPrefix(s, "sbx_ph_") {
			t.Errorf("claude's %s is %.12q…, not a placeholder", k, s)
		}
	}
}
