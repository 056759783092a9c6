package resolve

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestNPMTarball(t *testing.T) {
	reg := newFakeNPM(t, "/npm/")
	reg.token = "s3cr3t-token"
	reg.publish("@acme/tool", "1.2.3", &npmVersion{})
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".npmrc"),
		"@acme:registry="+reg.registry()+"\n//"+reg.host()+"/npm/:_authToken=${NPM_TOKEN}\n")
	s := New(Options{Dir: dir, Environ: isolatedEnv(t, "NPM_TOKEN=s3cr3t-token"), HTTPClient: tlsClient(t, reg.srv)})

	u, header, err := s.NPMTarball(context.Background(), "@acme/tool", "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if want := reg.registry() + "-/tarballs/@acme%2ftool/1.2.3.tgz"; u != want {
		t.Errorf("url = %s, want %s", u, want)
	}
	if got := header.Get("Authorization"); got != "Bearer s3cr3t-token" {
		t.Errorf("Authorization = %q", got)
	}
	if _, _, err := s.NPMTarball(context.Background(), "@acme/tool", "9.9.9"); err == nil ||
		!strings.Contains(err.Error(), "version 9.9.9 of @acme/tool does not exist") {
		t.Errorf("missing version: err = %v", err)
	}
	if _, _, err := s.NPMTarball(context.Background(), "../etc", "1.0.0"); err == nil {
		t.Error("invalid package name accepted")
	}
}
