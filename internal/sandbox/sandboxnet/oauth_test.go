package sandboxnet

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/policy"
)

func loginJWT(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc([]byte(claims)) + "." + enc([]byte(strings.Repeat("real-signature", 8)))
}

// TestOAuthSecretNetwork: an OAuth secret is resolved to its credential
// file's path (its tokens are not read into the values), and the
// network renders the guest's copy of the file with placeholders, puts
// the access placeholder in the secret's variable and keeps the login,
// and the guest's copy, across an update.
func TestOAuthSecretNetwork(t *testing.T) {
	dir := t.TempDir()
	access := loginJWT(`{"exp":` + time.Now().Add(time.Hour).Format("20060102") + `,"scp":["openid"]}`)
	id := loginJWT(`{"email":"user@example.com"}`)
	refresh := "rt_the-real-refresh-token"
	auth := filepath.Join(dir, "auth.json")
	doc, _ := json.Marshal(map[string]any{"auth_mode": "chatgpt", "tokens": map[string]string{
		"id_token": id, "access_token": access, "refresh_token": refresh, "account_id": "acct-1"}})
	if err := os.WriteFile(auth, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	s := policy.SecretBinding{Name: "codex", Env: "CHATGPT_ACCESS_TOKEN", Source: "file:auth.json",
		Hosts: []policy.HostPattern{policy.MustHostPattern("chatgpt.com")},
		OAuth: &policy.OAuth{TokenURL: "https://auth.openai.com/oauth/token", RefreshField: "refresh_token",
			IDToken: "tokens.id_token", AccessToken: "tokens.access_token", RefreshToken: "tokens.refresh_token"},
		File:   &policy.SecretFile{Path: "/home/agent/.codex/auth.json", Mode: 0o600, Owner: "agent"},
		Origin: policy.Origin{Block: "secret.codex", File: "main.hcl", Line: 3}}
	p := policy.Sandbox{
		Allow: []policy.AllowRule{
			{Pattern: policy.MustHostPattern("chatgpt.com")},
			{Pattern: policy.MustHostPattern("auth.openai.com")},
		},
		Secrets: []policy.SecretBinding{s},
	}
	values, err := ResolveSecrets(context.Background(), p, SecretSources{ConfigDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(values["codex"]); got != auth {
		t.Fatalf("ResolveSecrets gave %q for an OAuth secret: want its file's path %s", got, auth)
	}
	authority, err := ca.New()
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Options{Sandbox: "codex", Policy: p, Secrets: values, CA: authority})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	files := n.CredentialFiles()
	if len(files) != 1 || files[0].Path != s.File.Path || files[0].Owner != "agent" || files[0].Mode != 0o600 {
		t.Fatalf("credential files %+v", files)
	}
	for _, real := range []string{access, id, refresh} {
		if bytes.Contains(files[0].Data, []byte(real)) {
			t.Fatalf("the guest's credential file holds a real token:\n%s", files[0].Data)
		}
	}
	var guest struct {
		Tokens map[string]string `json:"tokens"`
	}
	if err := json.Unmarshal(files[0].Data, &guest); err != nil {
		t.Fatal(err)
	}
	if guest.Tokens["account_id"] != "acct-1" || !strings.HasPrefix(guest.Tokens["refresh_token"], "sbx_ph_") {
		t.Errorf("the guest's tokens: %v", guest.Tokens)
	}
	env := strings.Join(n.Configure().Env, "\n")
	if !strings.Contains(env, "CHATGPT_ACCESS_TOKEN="+guest.Tokens["access_token"]) || strings.Contains(env, access) {
		t.Errorf("the guest's environment:\n%s\nwant CHATGPT_ACCESS_TOKEN the file's access placeholder", env)
	}
	// An update keeps the login and the guest's copy.
	if _, err := n.Update(p, values); err != nil {
		t.Fatal(err)
	}
	if again := n.CredentialFiles(); len(again) != 1 || !bytes.Equal(again[0].Data, files[0].Data) {
		t.Errorf("an update rendered the credential file again")
	}
}
