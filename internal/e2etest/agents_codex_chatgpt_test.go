//go:build linux

package e2etest

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
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

	"github.com/sbx-dev/sbx/internal/egress"
	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/internal/egress/oauth"
	"github.com/sbx-dev/sbx/policy"
)

// codexLogin is the ChatGPT login spec of Codex's ~/.codex/auth.json.
var codexLogin = policy.OAuth{
	TokenURL:     "https://auth.openai.com/oauth/token",
	RefreshField: "refresh_token",
	IDToken:      "tokens.id_token",
	AccessToken:  "tokens.access_token",
	RefreshToken: "tokens.refresh_token",
	RefreshedAt:  "last_refresh",
}

// chatgptTokens is one generation of a ChatGPT login's tokens.
type chatgptTokens struct {
	id, access, refresh string
}

// chatgptJWT is a token as the identity provider signs it; the
// signature is random bytes here, which is all a client can check
// without the provider's keys (Codex reads the claims only).
func chatgptJWT(claims map[string]any, gen int) string {
	enc := base64.RawURLEncoding.EncodeToString
	h, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": "test"})
	c, _ := json.Marshal(claims)
	return enc(h) + "." + enc(c) + "." + enc([]byte(fmt.Sprintf("real-signature-of-generation-%03d-%s", gen, strings.Repeat("x", 200))))
}

func chatgptGeneration(gen int, exp time.Time) chatgptTokens {
	auth := map[string]any{"chatgpt_account_id": "acct-test-1", "chatgpt_plan_type": "pro", "chatgpt_user_id": "user-test-1"}
	return chatgptTokens{
		id: chatgptJWT(map[string]any{"iss": "https://auth.openai.com", "aud": []string{"app_EMoamEEZ73f0CkXaXp7hrann"},
			"email": "user@example.com", "email_verified": true, "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(),
			"https://api.openai.com/auth": auth}, gen),
		access: chatgptJWT(map[string]any{"iss": "https://auth.openai.com", "aud": []string{"https://api.openai.com/v1"},
			"exp": exp.Unix(), "iat": time.Now().Unix(), "scp": []string{"openid", "profile", "email", "offline_access"},
			"https://api.openai.com/auth": auth}, gen),
		refresh: fmt.Sprintf("rt_real-refresh-token-of-generation-%03d", gen),
	}
}

// chatgptAuthFile is ~/.codex/auth.json as Codex writes it after a
// ChatGPT login.
func chatgptAuthFile(tk chatgptTokens) []byte {
	data, _ := json.MarshalIndent(map[string]any{
		"auth_mode":      "chatgpt",
		"OPENAI_API_KEY": nil,
		"tokens": map[string]any{"id_token": tk.id, "access_token": tk.access, "refresh_token": tk.refresh,
			"account_id": "acct-test-1"},
		"last_refresh": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano),
	}, "", "  ")
	return data
}

// chatgptFake is chatgpt.com's Codex backend and auth.openai.com's token
// endpoint. The backend takes the login's current access token only
// (401 otherwise, as the real one answers an expired token) and serves
// turns as openaiFake serves the Responses API; the token endpoint
// takes the current refresh token only and rotates all three tokens.
type chatgptFake struct {
	api *openaiFake

	mu       sync.Mutex
	cur      chatgptTokens
	gen      int
	refreshs []string // the refresh tokens the endpoint got
	reqs     []string
}

func (f *chatgptFake) current() chatgptTokens {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}

func (f *chatgptFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	auth := r.Header.Get("Authorization")
	f.mu.Lock()
	cur := f.cur
	f.reqs = append(f.reqs, fmt.Sprintf("%s %s %s%s current-token=%v", r.Proto, r.Method, host, r.URL.Path, auth == "Bearer "+cur.access))
	f.mu.Unlock()
	switch {
	case host == "auth.openai.com" && r.URL.Path == "/oauth/token" && r.Method == http.MethodPost:
		f.token(w, r)
	case host == "chatgpt.com" && strings.HasPrefix(r.URL.Path, "/backend-api/"):
		if auth != "Bearer "+cur.access {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"detail":"Could not validate your token, please try signing in again."}`)
			return
		}
		switch r.URL.Path {
		case "/backend-api/codex/responses":
			// The Responses API of the API-key fake, reached as it is.
			r2 := r.Clone(r.Context())
			r2.Host, r2.URL.Path = "api.openai.com", "/v1/responses"
			r2.Header.Set("Authorization", "Bearer "+f.api.key)
			f.api.ServeHTTP(w, r2)
		case "/backend-api/wham/accounts/check":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, chatgptAccounts)
		default:
			http.NotFound(w, r)
		}
	default:
		http.NotFound(w, r)
	}
}

func (f *chatgptFake) token(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	json.Unmarshal(body, &req)
	rt, _ := req["refresh_token"].(string)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshs = append(f.refreshs, rt)
	w.Header().Set("Content-Type", "application/json")
	if rt != f.cur.refresh || req["grant_type"] != "refresh_token" {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":"invalid_grant","error_description":"The refresh token is invalid or was already used."}`)
		return
	}
	f.gen++
	f.cur = chatgptGeneration(f.gen, time.Now().Add(time.Hour))
	json.NewEncoder(w).Encode(map[string]string{"id_token": f.cur.id, "access_token": f.cur.access, "refresh_token": f.cur.refresh})
}

// checkBackend takes the requests the fake got since the last call,
// logs them and fails t unless codex reached chatgpt.com's Responses
// endpoint and every request to the backend carried the login's current
// real access token (the engine substituted the placeholder codex sent,
// the rotated token after a refresh).
func (f *chatgptFake) checkBackend(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	reqs := f.reqs
	f.reqs = nil
	f.mu.Unlock()
	t.Logf("the fake got:\n%s", strings.Join(reqs, "\n"))
	backend, responses := 0, 0
	for _, r := range reqs {
		if strings.Contains(r, " chatgpt.com/backend-api/") {
			backend++
			if strings.Contains(r, " chatgpt.com/backend-api/codex/responses ") {
				responses++
			}
			if !strings.HasSuffix(r, "current-token=true") {
				t.Errorf("a request reached the backend without the current real access token: %s", r)
			}
		}
	}
	if backend == 0 {
		t.Errorf("codex sent nothing to chatgpt.com's backend")
	}
	if responses == 0 {
		t.Errorf("codex's turn never reached chatgpt.com's Responses endpoint")
	}
}

// secrets returns what of tk must never reach the guest: the refresh
// token and the JWTs' signatures (their headers and claims the guest's
// placeholders keep).
func (tk chatgptTokens) secrets() []string {
	return []string{tk.refresh, tk.access[strings.LastIndexByte(tk.access, '.')+1:], tk.id[strings.LastIndexByte(tk.id, '.')+1:]}
}

// expire makes the fake's access token, and the returned auth.json
// that holds it, one that expired an hour ago, as after the login sat
// unused; its refresh token stays valid.
func (f *chatgptFake) expire() chatgptTokens {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cur.access = chatgptGeneration(f.gen, time.Now().Add(-time.Hour)).access
	return f.cur
}

// checkRefreshed fails t unless the token endpoint got expired's real
// refresh token exactly once and the host's credential file at hostFile
// holds the rotated tokens, still with mode 0600.
func (f *chatgptFake) checkRefreshed(t *testing.T, expired chatgptTokens, hostFile string) {
	t.Helper()
	f.mu.Lock()
	refreshs, rotated := append([]string(nil), f.refreshs...), f.cur
	f.mu.Unlock()
	if len(refreshs) != 1 || refreshs[0] != expired.refresh {
		t.Errorf("the token endpoint got %d refresh tokens (the real one: %v): want the real one once", len(refreshs), slices.Contains(refreshs, expired.refresh))
	}
	data, err := os.ReadFile(hostFile)
	if err != nil {
		t.Fatal(err)
	}
	var host struct {
		Tokens map[string]string `json:"tokens"`
	}
	json.Unmarshal(data, &host)
	if host.Tokens["access_token"] != rotated.access || host.Tokens["refresh_token"] != rotated.refresh || host.Tokens["id_token"] != rotated.id {
		t.Errorf("the host's auth.json does not hold the rotated tokens")
	}
	if fi, err := os.Stat(hostFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the host's auth.json: %v %v", fi.Mode(), err)
	}
}

// chatgptAccounts is the fake's answer to GET
// /backend-api/wham/accounts/check, which Codex asks before a turn to
// route it: the entry whose id is the login's chatgpt_account_id, its
// workspace_backend_origin an https origin (no path) and its
// account_routing_override one of "NO_CONSTRAINT", "us" or "us_cr"
// (Codex refuses the turn otherwise).
const chatgptAccounts = `{"accounts":[{"id":"acct-test-1","plan_type":"pro","structure":"personal","workspace_backend_origin":"https://chatgpt.com","account_routing_override":"NO_CONSTRAINT"}],"account_ordering":["acct-test-1"]}`

// engineProxy is a CONNECT proxy whose tunnels are flows of an egress
// engine, as the guest's connections are in a sandbox.
func engineProxy(t *testing.T, eng *egress.Engine) string {
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil || req.Method != http.MethodConnect {
					c.Close()
					return
				}
				host, port, err := net.SplitHostPort(req.Host)
				if err != nil || port != "443" {
					io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
					c.Close()
					return
				}
				io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
				eng.ServeFlow(ctx, host, 443, &bufferedConn{Conn: c, r: br})
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		cancel()
		wg.Wait()
	})
	return sock
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestCodexChatGPTThroughEngine runs the real codex binary on this host
// in ChatGPT-login mode through the egress engine (a CONNECT proxy
// whose tunnels are the engine's flows, codex in a network namespace of
// its own) against fake chatgpt.com and auth.openai.com: codex holds
// the guest's copy of auth.json, every token a placeholder (its JWTs
// with their claims), and the host its real file. Every request codex
// sends to chatgpt.com's backend reaches it with the real access token;
// then, with the host's access token expired, codex refreshes on its
// own (it reads the expiry from the placeholder's claims), the token
// endpoint gets the real refresh token once, the host's file gets the
// rotated tokens, and the backend gets the new access token. Codex's
// auth.json (which it rewrites after the refresh), every file under its
// home and its output hold no real token nor a JWT's real signature.
// Both runs complete a turn: Codex routes it after its workspace
// routing discovery (/backend-api/wham/accounts/check) and writes the
// file the fake Responses API asks for.
func TestCodexChatGPTThroughEngine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	exe := codexExecutable(ctx, t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is needed to run codex without a network: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	caPEM, cert := testPKI(t, "chatgpt.com", "auth.openai.com")
	fake := &chatgptFake{api: &openaiFake{key: codexKey}, gen: 1, cur: chatgptGeneration(1, time.Now().Add(time.Hour))}
	srv := httptest.NewUnstartedServer(fake)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	addr := srv.Listener.Addr().String()

	hostDir := t.TempDir()
	hostFile := filepath.Join(hostDir, "auth.json")
	if err := os.WriteFile(hostFile, chatgptAuthFile(fake.current()), 0o600); err != nil {
		t.Fatal(err)
	}
	origin := policy.Origin{Block: "secret.codex_login", File: "main.hcl", Line: 1}
	pol := policy.Sandbox{
		Allow: []policy.AllowRule{
			{Pattern: policy.MustHostPattern("chatgpt.com"), Origin: policy.Origin{Block: "egress.openai", File: "main.hcl", Line: 2}},
			{Pattern: policy.MustHostPattern("auth.openai.com"), Origin: policy.Origin{Block: "egress.openai", File: "main.hcl", Line: 2}},
		},
		Hosts: []policy.HostMapping{{Name: "chatgpt.com", Addr: addr}, {Name: "auth.openai.com", Addr: addr}},
		CAs:   []policy.CA{{Path: "upstream-ca.pem", PEM: string(caPEM)}},
		Secrets: []policy.SecretBinding{{Name: "codex_login", Env: "CHATGPT_ACCESS_TOKEN", Source: "file:" + hostFile,
			Hosts: []policy.HostPattern{policy.MustHostPattern("chatgpt.com")}, OAuth: &codexLogin,
			File: &policy.SecretFile{Path: "/home/agent/.codex/auth.json", Mode: 0o600, Owner: "agent"}, Origin: origin}},
	}
	authority, err := ca.New()
	if err != nil {
		t.Fatal(err)
	}
	auditDir := t.TempDir()
	aud, err := audit.Open(auditDir, audit.Options{Sandbox: "codex"})
	if err != nil {
		t.Fatal(err)
	}
	defer aud.Close()

	home := t.TempDir()
	codexHome := filepath.Join(home, ".codex")
	os.MkdirAll(codexHome, 0o700)
	guestCA := filepath.Join(t.TempDir(), "sbx-ca.pem")
	if err := os.WriteFile(guestCA, authority.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}

	// run opens the login as a sandbox's start does (the guest's copy
	// rendered from the host's file), runs one codex turn through a new
	// engine and returns codex's output.
	var outputs []string
	run := func(t *testing.T) (string, *oauth.Login) {
		login, err := oauth.Open("codex_login", codexLogin, hostFile, oauth.Options{})
		if err != nil {
			t.Fatal(err)
		}
		guestFile, err := login.Render()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(codexHome, "auth.json"), guestFile, 0o600); err != nil {
			t.Fatal(err)
		}
		cp, err := egress.CompileLogins(pol, nil, nil, map[string]*oauth.Login{"codex_login": login})
		if err != nil {
			t.Fatal(err)
		}
		eng, err := egress.NewEngine(cp, egress.Options{CA: authority, Audit: aud})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		sock := engineProxy(t, eng)
		work := t.TempDir()
		hostGit(t, work, "init", "-q")
		rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(rctx, unshare, append([]string{"--user", "--map-root-user", "--net", "--", self},
			codexArgs(exe, work, "Write the file "+codexFile+", then say so.")...)...)
		cmd.Dir = work
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + codexHome,
			"CHATGPT_ACCESS_TOKEN=" + login.AccessPlaceholder(),
			"SSL_CERT_FILE=" + guestCA, codexRelayEnv + "=" + sock}
		cmd.WaitDelay = 5 * time.Second
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		err = cmd.Run()
		outputs = append(outputs, out.String())
		t.Logf("codex: %v", err)
		fake.checkBackend(t)
		if err != nil {
			aud.Close()
			dumpAudit(t, auditDir)
			t.Fatalf("codex exec: %v\n%s", err, out.String())
		}
		if got, err := os.ReadFile(filepath.Join(work, codexFile)); err != nil || string(got) != codexContent+"\n" {
			t.Errorf("%s: %q, %v\n%s", codexFile, got, err, out.String())
		}
		if !strings.Contains(out.String(), codexFinal) {
			t.Errorf("codex's output lacks the final message:\n%s", out.String())
		}
		return out.String(), login
	}

	first := fake.current()
	t.Run("turn", func(t *testing.T) {
		run(t)
		if len(fake.refreshs) != 0 {
			t.Errorf("codex refreshed a login that had not expired: %d refreshes", len(fake.refreshs))
		}
	})
	if t.Failed() {
		return
	}
	t.Run("expired access token", func(t *testing.T) {
		// The host's access token has expired: codex reads the expiry
		// from the placeholder's claims and refreshes before its turn.
		expired := fake.expire()
		if err := os.WriteFile(hostFile, chatgptAuthFile(expired), 0o600); err != nil {
			t.Fatal(err)
		}
		run(t)
		fake.checkRefreshed(t, expired, hostFile)
	})

	// Nothing codex holds or printed has a real token: its auth.json
	// (which it rewrote after the refresh) and its output.
	guest, err := os.ReadFile(filepath.Join(codexHome, "auth.json"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("codex's auth.json at the end:\n%s", guest)
	texts := map[string]string{"codex's output": strings.Join(outputs, "\n")}
	filepath.Walk(home, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if b, err := os.ReadFile(p); err == nil {
				texts[p] = string(b)
			}
		}
		return nil
	})
	fake.mu.Lock()
	all := []chatgptTokens{first, fake.cur}
	fake.mu.Unlock()
	for gen, tk := range all {
		for kind, v := range map[string]string{"refresh token": tk.refresh,
			"access token's signature": tk.access[strings.LastIndexByte(tk.access, '.')+1:],
			"id token's signature":     tk.id[strings.LastIndexByte(tk.id, '.')+1:]} {
			for where, text := range texts {
				if strings.Contains(text, v) {
					t.Errorf("the real %s (generation %d) is in %s", kind, gen+1, where)
				}
			}
		}
	}
	var g struct {
		Tokens map[string]string `json:"tokens"`
	}
	json.Unmarshal(guest, &g)
	if !strings.HasPrefix(g.Tokens["refresh_token"], "sbx_ph_") {
		t.Errorf("codex's refresh token is %.12q…, not a placeholder", g.Tokens["refresh_token"])
	}
}

// dumpAudit logs the audit files of dir.
func dumpAudit(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		t.Logf("audit %s:\n%s", e.Name(), b)
	}
}
