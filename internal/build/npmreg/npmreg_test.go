package npmreg_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/npmreg"
)

// registry serves one package document under /npm/, answering only
// requests that carry the token.
func registry(t *testing.T, token string) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.URL.EscapedPath() != "/npm/@acme%2ftool" {
			http.NotFound(w, r)
			return
		}
		doc := map[string]any{
			"name":      "@acme/tool",
			"dist-tags": map[string]string{"latest": "1.2.3"},
			"versions": map[string]any{
				"1.2.3": map[string]any{"version": "1.2.3", "dist": map[string]string{
					"tarball": "https://" + r.Host + "/npm/-/tarballs/@acme%2ftool/1.2.3.tgz", "integrity": "sha512-AAAA"}},
				"0.0.1": map[string]any{"version": "0.0.1"},
			},
		}
		json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The registry and its token come from the project .npmrc, the token
// through an environment variable the user allows it (SBX_NPMRC_ENV);
// the tarball's header carries it.
func TestLookupAndTarball(t *testing.T) {
	srv := registry(t, "s3cr3t-token")
	dir := t.TempDir()
	host := strings.TrimPrefix(srv.URL, "https://")
	npmrc := "@acme:registry=" + srv.URL + "/npm/\n//" + host + "/npm/:_authToken=${NPM_TOKEN}\n"
	if err := os.WriteFile(filepath.Join(dir, ".npmrc"), []byte(npmrc), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + t.TempDir(), "PATH=" + t.TempDir(), "NPM_TOKEN=s3cr3t-token", npmreg.ProjectEnvVar + "=NPM_TOKEN"}
	reg := npmreg.New(dir, env, srv.Client())
	ctx := context.Background()

	doc, err := reg.Lookup(ctx, "@acme/tool")
	if err != nil {
		t.Fatal(err)
	}
	if doc.DistTags["latest"] != "1.2.3" || doc.Versions["1.2.3"].Dist.Integrity != "sha512-AAAA" {
		t.Errorf("document = %+v", doc)
	}
	u, header, err := doc.Tarball("1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if want := srv.URL + "/npm/-/tarballs/@acme%2ftool/1.2.3.tgz"; u != want {
		t.Errorf("url = %s, want %s", u, want)
	}
	if got := header.Get("Authorization"); got != "Bearer s3cr3t-token" {
		t.Errorf("Authorization = %q", got)
	}
	if _, _, err := doc.Tarball("9.9.9"); err == nil || !strings.Contains(err.Error(), "version 9.9.9 of @acme/tool does not exist") {
		t.Errorf("missing version: err = %v", err)
	}
	if _, _, err := doc.Tarball("0.0.1"); err == nil || !strings.Contains(err.Error(), "gives no tarball") {
		t.Errorf("version without a tarball: err = %v", err)
	}
	for _, bad := range []string{"../etc", "@acme", "@acme/", "_x", "a/b"} {
		if _, err := reg.Lookup(ctx, bad); err == nil || !strings.Contains(err.Error(), "invalid npm package name") {
			t.Errorf("Lookup(%q): err = %v, want an invalid name", bad, err)
		}
	}
}

// Without the token the registry refuses; the error says where the
// registry was configured and repeats no credentials of its URL.
func TestLookupErrors(t *testing.T) {
	srv := registry(t, "s3cr3t-token")
	withUser := strings.Replace(srv.URL, "https://", "https://user:hunter2@", 1)
	env := []string{"HOME=" + t.TempDir(), "PATH=" + t.TempDir(), "NPM_CONFIG_REGISTRY=" + withUser + "/npm/"}
	_, err := npmreg.New(t.TempDir(), env, srv.Client()).Lookup(context.Background(), "@acme/tool")
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "NPM_CONFIG_REGISTRY") {
		t.Fatalf("err = %v, want a 401 naming NPM_CONFIG_REGISTRY", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("err = %v repeats the URL's password", err)
	}
	// No registry configured and no npm on PATH to ask.
	env = []string{"HOME=" + t.TempDir(), "PATH=" + t.TempDir()}
	_, err = npmreg.New(t.TempDir(), env, srv.Client()).Lookup(context.Background(), "left-pad")
	if err == nil || !strings.Contains(err.Error(), "no npm registry is configured") {
		t.Errorf("err = %v, want no registry configured", err)
	}
}
