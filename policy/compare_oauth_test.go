package policy_test

import (
	"testing"

	"github.com/sbx-dev/sbx/policy"
)

func codexLogin() policy.SecretBinding {
	s := secret("codex", "CODEX_ACCESS_TOKEN", "file:~/.codex/auth.json", "chatgpt.com")
	s.OAuth = &policy.OAuth{TokenURL: "https://auth.openai.com/oauth/token", RefreshField: "refresh_token",
		AccessToken: "tokens.access_token", RefreshToken: "tokens.refresh_token", IDToken: "tokens.id_token"}
	s.File = &policy.SecretFile{Path: "/home/agent/.codex/auth.json", Mode: 0o600, Owner: "agent"}
	return s
}

func TestCompareSecretOAuth(t *testing.T) {
	plain := secret("codex", "CODEX_ACCESS_TOKEN", "file:~/.codex/auth.json", "chatgpt.com")
	moved := codexLogin()
	moved.OAuth = &policy.OAuth{}
	*moved.OAuth = *codexLogin().OAuth
	moved.OAuth.TokenURL = "https://auth.example.com/token"
	fields := codexLogin()
	fields.OAuth = &policy.OAuth{}
	*fields.OAuth = *codexLogin().OAuth
	fields.OAuth.RefreshedAt = "last_refresh"
	expiry := codexLogin()
	expiry.OAuth = &policy.OAuth{}
	*expiry.OAuth = *codexLogin().OAuth
	expiry.OAuth.ExpiresAt, expiry.OAuth.ExpiresAtUnit = "tokens.expires_at", policy.UnixSeconds
	scoped := codexLogin()
	scoped.OAuth = &policy.OAuth{}
	*scoped.OAuth = *codexLogin().OAuth
	scoped.OAuth.Scope = "openid offline_access"
	relocated := codexLogin()
	relocated.File = &policy.SecretFile{Path: "/root/.codex/auth.json", Mode: 0o600, Owner: "root"}
	noFile := codexLogin()
	noFile.File = nil

	type want struct {
		dir  policy.Direction
		kind string
	}
	for _, tc := range []struct {
		name     string
		old, new []policy.SecretBinding
		want     []want
	}{
		{"new oauth secret", nil, []policy.SecretBinding{codexLogin()},
			[]want{{policy.Widen, "secret"}, {policy.Widen, "secret.oauth"}, {policy.Widen, "secret.file"}}},
		{"oauth added to a secret", []policy.SecretBinding{plain}, []policy.SecretBinding{codexLogin()},
			[]want{{policy.Widen, "secret.oauth"}, {policy.Widen, "secret.file"}}},
		{"oauth and file removed", []policy.SecretBinding{codexLogin()}, []policy.SecretBinding{plain},
			// The whole credential file is now the value substituted.
			[]want{{policy.Narrow, "secret.oauth"}, {policy.Widen, "secret.oauth"}, {policy.Narrow, "secret.file"}}},
		{"token endpoint moved", []policy.SecretBinding{codexLogin()}, []policy.SecretBinding{moved},
			[]want{{policy.Widen, "secret.oauth"}}},
		{"other token fields", []policy.SecretBinding{codexLogin()}, []policy.SecretBinding{fields},
			[]want{{policy.Neutral, "secret.oauth"}}},
		{"expiry field named", []policy.SecretBinding{codexLogin()}, []policy.SecretBinding{expiry},
			[]want{{policy.Neutral, "secret.oauth"}}},
		{"scope named", []policy.SecretBinding{codexLogin()}, []policy.SecretBinding{scoped},
			[]want{{policy.Neutral, "secret.oauth"}}},
		{"file moved", []policy.SecretBinding{codexLogin()}, []policy.SecretBinding{relocated},
			[]want{{policy.Neutral, "secret.file"}}},
		{"file dropped", []policy.SecretBinding{codexLogin()}, []policy.SecretBinding{noFile},
			[]want{{policy.Narrow, "secret.file"}}},
		{"unchanged", []policy.SecretBinding{codexLogin()}, []policy.SecretBinding{codexLogin()}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := policy.Compare(policy.Sandbox{Secrets: tc.old}, policy.Sandbox{Secrets: tc.new})
			var g []want
			for _, c := range got {
				g = append(g, want{c.Direction, c.Kind})
			}
			if len(g) != len(tc.want) {
				t.Fatalf("changes = %v, want %v", got, tc.want)
			}
			for i := range g {
				if g[i] != tc.want[i] {
					t.Errorf("change %d = %+v (%s), want %v", i, g[i], got[i].Detail, tc.want[i])
				}
			}
		})
	}
}

func TestHashSecretOAuth(t *testing.T) {
	a := policy.Sandbox{Secrets: []policy.SecretBinding{codexLogin()}}
	b := policy.Sandbox{Secrets: []policy.SecretBinding{codexLogin()}}
	b.Secrets[0].OAuth.TokenURL = "https://auth.example.com/token"
	c := policy.Sandbox{Secrets: []policy.SecretBinding{codexLogin()}}
	c.Secrets[0].File = nil
	if policy.Hash(a) == policy.Hash(b) || policy.Hash(a) == policy.Hash(c) {
		t.Fatal("the hash does not depend on a secret's oauth or file block")
	}
}

func TestCheckScope(t *testing.T) {
	for s, ok := range map[string]bool{
		"user:inference user:profile": true, "openid": true, "": false, "a  b": false, " a": false,
		"a\tb": false, `a"b`: false, `a\b`: false, "é": false,
	} {
		if err := policy.CheckScope(s); (err == nil) != ok {
			t.Errorf("CheckScope(%q) = %v", s, err)
		}
	}
}
