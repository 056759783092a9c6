package npmreg_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/npmreg"
)

// attacker is a registry a checkout's .npmrc names: it records every
// request and the Authorization header each carried.
type attacker struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string
}

func newAttacker(t *testing.T) *attacker {
	t.Helper()
	a := &attacker{}
	l, err := net.Listen("tcp", "127.0.0.7:0")
	if err != nil {
		l, err = net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
	}
	a.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen = append(a.seen, r.Method+" "+r.URL.Path+" Authorization="+r.Header.Get("Authorization"))
		a.mu.Unlock()
		http.NotFound(w, r)
	})}}
	a.srv.Start()
	t.Cleanup(a.srv.Close)
	return a
}

func (a *attacker) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

// take returns the requests recorded and forgets them.
func (a *attacker) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := a.seen
	a.seen = nil
	return seen
}

const reviewerToken = "ghp_reviewers-own-token-never-sent"

// attackerNpmrc is what a pull request adds next to the spec: its own
// registry, and the reviewer's token as the credentials for it.
func attackerNpmrc(a *attacker) string {
	host := strings.TrimPrefix(a.srv.URL, "http://")
	return "registry=" + a.srv.URL + "/\n//" + host + "/:_authToken=${GITHUB_TOKEN}\n"
}

// TestProjectNpmrcExpandsNoEnvironment plays a checkout whose .npmrc
// names its own registry and asks for ${GITHUB_TOKEN} as its token:
// looking a package up is an error naming the file, the line, the
// variable and the opt-in, and the attacker's registry sees no request.
// The same lines in the user's own ~/.npmrc are the user's and expand as
// npm expands them; and with SBX_NPMRC_ENV naming the variable, the
// project's do too.
func TestProjectNpmrcExpandsNoEnvironment(t *testing.T) {
	a := newAttacker(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".npmrc"), []byte(attackerNpmrc(a)), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + t.TempDir(), "PATH=" + t.TempDir(), "GITHUB_TOKEN=" + reviewerToken}
	_, err := npmreg.New(dir, env, a.srv.Client()).Lookup(context.Background(), "left-pad")
	if err == nil {
		t.Fatal("Lookup with a project .npmrc that expands the environment succeeded")
	}
	for _, want := range []string{filepath.Join(dir, ".npmrc") + ":2", "GITHUB_TOKEN", npmreg.ProjectEnvVar} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), reviewerToken) {
		t.Errorf("error quotes the token: %v", err)
	}
	if got := a.requests(); len(got) != 0 {
		t.Errorf("the checkout's registry was contacted: %q", got)
	}

	// The user's own configuration: expanded, and sent to the registry
	// the user named.
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".npmrc"), []byte(attackerNpmrc(a)), 0o600); err != nil {
		t.Fatal(err)
	}
	env = []string{"HOME=" + home, "PATH=" + t.TempDir(), "GITHUB_TOKEN=" + reviewerToken}
	npmreg.New(t.TempDir(), env, a.srv.Client()).Lookup(context.Background(), "left-pad")
	if got := a.requests(); len(got) != 1 || !strings.HasSuffix(got[0], "Authorization=Bearer "+reviewerToken) {
		t.Errorf("the user's own .npmrc: requests %q, want one with the token", got)
	}

	// The user opts in for this variable.
	env = []string{"HOME=" + t.TempDir(), "PATH=" + t.TempDir(), "GITHUB_TOKEN=" + reviewerToken, npmreg.ProjectEnvVar + "=NPM_TOKEN, GITHUB_TOKEN"}
	npmreg.New(dir, env, a.srv.Client()).Lookup(context.Background(), "left-pad")
	if got := a.requests(); len(got) != 2 || !strings.HasSuffix(got[1], "Authorization=Bearer "+reviewerToken) {
		t.Errorf("with %s: requests %q, want a second one with the token", npmreg.ProjectEnvVar, got)
	}
}

// lookupWithin runs Lookup for a project in dir and fails the test if it
// has not returned within a minute (a named pipe blocking it).
func lookupWithin(t *testing.T, dir string, a *attacker) error {
	t.Helper()
	env := []string{"HOME=" + t.TempDir(), "PATH=" + t.TempDir(), "NPM_CONFIG_REGISTRY=" + a.srv.URL + "/"}
	done := make(chan error, 1)
	go func() {
		_, err := npmreg.New(dir, env, a.srv.Client()).Lookup(context.Background(), "left-pad")
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("Lookup did not return: it is blocked reading the project .npmrc")
	}
	return nil
}

// TestProjectNpmrcSpecialFiles plays a checkout whose .npmrc is a named
// pipe (which would block the read until something writes to it), a
// link to /dev/zero (which never ends) and a link to a file outside the
// checkout: each is an error naming the file, returned at once, and no
// registry is asked.
func TestProjectNpmrcSpecialFiles(t *testing.T) {
	a := newAttacker(t)
	outside := filepath.Join(t.TempDir(), "npmrc")
	if err := os.WriteFile(outside, []byte("registry="+a.srv.URL+"/outside/\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		plant      func(path string) error
	}{
		{"fifo", "named pipe", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"dev-zero", "outside", func(p string) error { return os.Symlink("/dev/zero", p) }},
		{"link-out", "outside", func(p string) error { return os.Symlink(outside, p) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tc.plant(filepath.Join(dir, ".npmrc")); err != nil {
				t.Fatal(err)
			}
			err := lookupWithin(t, dir, a)
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, ".npmrc")) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Lookup: err = %v, want an error naming the file and %q", err, tc.want)
			}
			if got := a.requests(); len(got) != 0 {
				t.Errorf("a registry was asked: %q", got)
			}
		})
	}
}

// TestDefaultRegistryAskedOutsideTheProject checks that when no
// configuration names a registry, npm is asked for its default from the
// user's home directory, not from the project: npm would read the
// project's .npmrc there itself, with none of these rules. The npm on
// PATH here answers with a registry URL naming the directory it ran in.
func TestDefaultRegistryAskedOutsideTheProject(t *testing.T) {
	a := newAttacker(t)
	bin := t.TempDir()
	script := "#!/bin/sh\necho \"" + a.srv.URL + "/ran-in$(pwd)/\"\n"
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	home, dir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".npmrc"), []byte("@other:registry="+a.srv.URL+"/other/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "PATH=" + bin}
	npmreg.New(dir, env, a.srv.Client()).Lookup(context.Background(), "left-pad")
	got := a.take()
	if len(got) != 1 || !strings.Contains(got[0], "/ran-in"+home+"/") {
		t.Errorf("requests %q, want one to the registry npm names when run in %s", got, home)
	}
}
