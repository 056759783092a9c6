//go:build linux

package e2etest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// codexChatGPTSpec adds to examples/agent-debian a sandbox of Codex in
// ChatGPT-login mode: the login's tokens in codex-auth.json of the
// configuration directory, the guest's copy with placeholders at
// ~/.codex/auth.json, chatgpt.com and auth.openai.com mapped to the
// test's server.
const codexChatGPTSpec = `
egress "chatgpt" {
  allow = ["chatgpt.com", "auth.openai.com"]
  hosts = { for name, addr in var.upstreams : name => addr if contains(["chatgpt.com", "auth.openai.com"], name) }
  ca    = var.upstream_ca
}

secret "codex_login" {
  env    = "CHATGPT_ACCESS_TOKEN"
  hosts  = ["chatgpt.com"]
  source = "file:codex-auth.json"
  oauth {
    token_url     = "https://auth.openai.com/oauth/token"
    refresh_field = "refresh_token"
    id_token      = "tokens.id_token"
    access_token  = "tokens.access_token"
    refresh_token = "tokens.refresh_token"
    refreshed_at  = "last_refresh"
  }
  file {
    path  = "/home/agent/.codex/auth.json"
    mode  = "0600"
    owner = "agent"
  }
}

sandbox "codex_chatgpt" {
  image   = image.agent
  vfs     = [vfs.workspace]
  egress  = [egress.chatgpt]
  secrets = [secret.codex_login]
  user    = "agent"
  cpus    = 2
  memory  = "2GiB"
}
`

// TestCodexChatGPTInVM runs the real Codex CLI in a sandbox in
// ChatGPT-login mode: the host holds ~/.codex/auth.json's real tokens
// (a secret with oauth and file blocks), the guest a copy with
// placeholders, and chatgpt.com and auth.openai.com are chatgptFake.
// A sandbox started on a fresh login runs a turn of codex exec, which
// must write the scripted file without refreshing. A second one,
// started after the host's access token expired, runs another: Codex
// reads the expiry from its placeholder's claims and refreshes, the
// token endpoint gets the real refresh token exactly once, the host's
// auth.json holds the rotated tokens, and the turn reaches the backend
// with the new access token. In neither sandbox is a real token (a
// refresh token, a JWT's signature, of either generation) in the
// guest's files — its auth.json as Codex left it included —, its
// processes' environments or what came out of it.
func TestCodexChatGPTInVM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	fake := &chatgptFake{api: &openaiFake{key: codexKey}, gen: 1, cur: chatgptGeneration(1, time.Now().Add(time.Hour))}
	first := fake.current()

	// turn starts a sandbox on the host file data, runs a codex turn in
	// it and returns the sandbox (stopped when t ends) and the guest's
	// auth.json afterwards.
	turn := func(t *testing.T, data []byte) (*agentSandbox, []byte) {
		a := startAgentSandbox(t, ctx, agentSpec{Sandbox: "codex_chatgpt", Upstream: fake,
			Config: map[string][]byte{"chatgpt.hcl": []byte(codexChatGPTSpec), "codex-auth.json": data}})
		ph, code, _ := a.Run(t, ctx, "root", 60*time.Second, `printf %s "$CHATGPT_ACCESS_TOKEN"`)
		if code != 0 || strings.Count(ph, ".") != 2 {
			t.Fatalf("$CHATGPT_ACCESS_TOKEN in the guest: exit %d %.40q", code, ph)
		}
		a.Placeholders["CHATGPT_ACCESS_TOKEN"] = ph
		args := codexArgs("codex", "/workspace", "Write the file "+codexFile+", then say so.")
		out, code, took := a.Run(t, ctx, "", 8*time.Minute, shellQuote(args))
		t.Logf("codex exec took %v:\n%s", took.Round(time.Millisecond), out)
		fake.checkBackend(t)
		if code != 0 || !strings.Contains(out, codexFinal) {
			t.Errorf("codex exec: exit %d", code)
		}
		if got, err := os.ReadFile(filepath.Join(a.Work, codexFile)); err != nil || string(got) != codexContent+"\n" {
			t.Errorf("the host's worktree: %q, %v; want %q", got, err, codexContent+"\n")
		}
		guest, code, _ := a.Run(t, ctx, "root", 60*time.Second, `cat /home/agent/.codex/auth.json`)
		if code != 0 {
			t.Fatalf("the guest's auth.json: exit %d\n%s", code, guest)
		}
		var g struct {
			AuthMode string            `json:"auth_mode"`
			Tokens   map[string]string `json:"tokens"`
		}
		if err := json.Unmarshal([]byte(guest), &g); err != nil || g.AuthMode != "chatgpt" {
			t.Errorf("the guest's auth.json: %v, auth_mode %q", err, g.AuthMode)
		}
		if !strings.HasPrefix(g.Tokens["refresh_token"], "sbx_ph_") {
			t.Errorf("the guest's refresh token is %.12q…, not a placeholder", g.Tokens["refresh_token"])
		}
		return a, []byte(guest)
	}

	t.Run("turn", func(t *testing.T) {
		a, _ := turn(t, chatgptAuthFile(first))
		if len(fake.refreshs) != 0 {
			t.Errorf("codex refreshed a login that had not expired: %d refreshes", len(fake.refreshs))
		}
		a.secrets = first.secrets()
		a.CheckNoLeak(t, ctx)
	})
	if t.Failed() {
		return
	}
	t.Run("expired access token", func(t *testing.T) {
		expired := fake.expire()
		a, _ := turn(t, chatgptAuthFile(expired))
		fake.checkRefreshed(t, expired, filepath.Join(a.Config, "codex-auth.json"))
		a.secrets = append(first.secrets(), fake.current().secrets()...)
		a.CheckNoLeak(t, ctx)
	})
}
