package lang

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sbx-dev/sbx/policy"
)

const codexLoginSpec = `
image "agent" {
  base = "alpine:3.23"
  user "agent" { uid = 1000 }
}
egress "llm" {
  allow = ["chatgpt.com", "auth.openai.com"]
}
secret "codex" {
  env    = "CODEX_ACCESS_TOKEN"
  hosts  = ["chatgpt.com"]
  source = "file:~/.codex/auth.json"
  oauth {
    token_url     = "https://auth.openai.com/oauth/token"
    client_id     = "app_EMoamEEZ73f0CkXaXp7hrann"
    id_token      = "tokens.id_token"
    access_token  = "tokens.access_token"
    refresh_token = "tokens.refresh_token"
    refreshed_at  = "last_refresh"
  }
  file {
    path  = "/home/agent/.codex/auth.json"
    owner = "agent"
  }
}
sandbox "codex" {
  image   = image.agent
  egress  = [egress.llm]
  secrets = [secret.codex]
}
`

func TestSecretOAuthAndFile(t *testing.T) {
	cfg := mustLoad(t, writeDir(t, map[string]string{"main.hcl": codexLoginSpec}), Options{})
	sb := cfg.Sandboxes["codex"]
	if len(sb.Policy.Secrets) != 1 {
		t.Fatalf("secrets = %+v", sb.Policy.Secrets)
	}
	s := sb.Policy.Secrets[0]
	wantOAuth := &policy.OAuth{
		TokenURL: "https://auth.openai.com/oauth/token", RefreshField: "refresh_token",
		ClientID: "app_EMoamEEZ73f0CkXaXp7hrann", IDToken: "tokens.id_token",
		AccessToken: "tokens.access_token", RefreshToken: "tokens.refresh_token", RefreshedAt: "last_refresh",
	}
	if d := cmp.Diff(wantOAuth, s.OAuth); d != "" {
		t.Errorf("oauth (-want +got):\n%s", d)
	}
	wantFile := &policy.SecretFile{Path: "/home/agent/.codex/auth.json", Mode: 0o600, Owner: "agent"}
	if d := cmp.Diff(wantFile, s.File); d != "" {
		t.Errorf("file (-want +got):\n%s", d)
	}
	if s.OAuth.TokenHost() != "auth.openai.com" {
		t.Errorf("TokenHost = %q", s.OAuth.TokenHost())
	}
}

// A secret is an OAuth login or an AWS credential, not both: the blocks
// together are an error on the oauth block's line.
func TestSecretOAuthAndAWSRefused(t *testing.T) {
	spec := strings.Replace(codexLoginSpec, "  oauth {", "  aws {\n    services = [\"s3\"]\n    regions  = [\"us-east-1\"]\n  }\n  oauth {", 1)
	_, diags := Load(writeDir(t, map[string]string{"main.hcl": spec}), Options{})
	var found bool
	for _, d := range diags {
		if d.Summary == "Secret is both an OAuth login and an AWS credential" {
			found = d.Subject != nil && d.Subject.Start.Line == 17
		}
	}
	if !found {
		t.Fatalf("aws and oauth in one secret: %v", diags)
	}
}

// Claude Code's login: opaque tokens, the expiry in milliseconds.
func TestSecretOAuthExpiresAt(t *testing.T) {
	spec := `
egress "llm" {
  allow = ["api.anthropic.com", "platform.claude.com"]
}
secret "claude" {
  env    = "CLAUDE_LOGIN_ACCESS"
  hosts  = ["api.anthropic.com"]
  source = "file:~/.claude/.credentials.json"
  oauth {
    token_url       = "https://platform.claude.com/v1/oauth/token"
    client_id       = "9d1c250a-e61b-44d9-88ed-5944d1962f5e"
    scope           = "user:inference user:profile"
    access_token    = "claudeAiOauth.accessToken"
    refresh_token   = "claudeAiOauth.refreshToken"
    expires_at      = "claudeAiOauth.expiresAt"
    expires_at_unit = "ms"
  }
  file {
    path  = "/home/agent/.claude/.credentials.json"
    owner = "agent"
  }
}
image "agent" {
  base = "alpine:3.23"
  user "agent" { uid = 1000 }
}
sandbox "claude" {
  image   = image.agent
  egress  = [egress.llm]
  secrets = [secret.claude]
}
`
	cfg := mustLoad(t, writeDir(t, map[string]string{"main.hcl": spec}), Options{})
	want := &policy.OAuth{
		TokenURL: "https://platform.claude.com/v1/oauth/token", RefreshField: "refresh_token",
		ClientID: "9d1c250a-e61b-44d9-88ed-5944d1962f5e", Scope: "user:inference user:profile", AccessToken: "claudeAiOauth.accessToken",
		RefreshToken: "claudeAiOauth.refreshToken", ExpiresAt: "claudeAiOauth.expiresAt", ExpiresAtUnit: policy.UnixMilliseconds,
	}
	if d := cmp.Diff(want, cfg.Sandboxes["claude"].Policy.Secrets[0].OAuth); d != "" {
		t.Errorf("oauth (-want +got):\n%s", d)
	}
}
