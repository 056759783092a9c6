package egress

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/policy"
)

const gitHTTPBackend = "/usr/lib/git-core/git-http-backend"

// gitEnv is a git environment that reads no user or system config.
func gitEnv(home string, extra ...string) []string {
	return append([]string{
		"HOME=" + home,
		"PATH=" + os.Getenv("PATH"),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t",
	}, extra...)
}

func runGit(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func mustGit(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	out, err := runGit(t, dir, env, args...)
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return out
}

// TestGitPushScopedRefs runs the real git client through the engine
// against git http-backend: clone works, a push to refs/heads/agent/x
// works, a push to main is refused and git prints why.
func TestGitPushScopedRefs(t *testing.T) {
	if _, err := os.Stat(gitHTTPBackend); err != nil {
		t.Fatalf("git http-backend is needed: %v", err)
	}
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	os.Mkdir(home, 0o700)
	env := gitEnv(home)

	// The upstream: a bare repository with one commit on main.
	root := filepath.Join(tmp, "srv")
	os.Mkdir(root, 0o700)
	bare := filepath.Join(root, "repo.git")
	mustGit(t, tmp, env, "init", "-q", "--bare", "-b", "main", bare)
	mustGit(t, bare, env, "config", "http.receivepack", "true")
	seed := filepath.Join(tmp, "seed")
	mustGit(t, tmp, env, "init", "-q", "-b", "main", seed)
	os.WriteFile(filepath.Join(seed, "README"), []byte("hello\n"), 0o644)
	mustGit(t, seed, env, "add", "README")
	mustGit(t, seed, env, "commit", "-q", "-m", "first")
	mustGit(t, seed, env, "push", "-q", bare, "main")
	mainBefore := strings.TrimSpace(mustGit(t, bare, env, "rev-parse", "main"))

	pki := newUpstreamPKI(t)
	backend := &cgi.Handler{
		Path: gitHTTPBackend,
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + home},
	}
	up := upstreamTLS(t, pki, backend, "git.test")
	rule := policy.AllowRule{Pattern: policy.MustHostPattern("git.test"), GitPush: []string{"refs/heads/agent/*"}, Origin: origin("egress.git", 12)}
	h := newHarness(t, spec(pki, []policy.AllowRule{rule}, mapping("git.test", serverAddr(up))), nil, nil)

	// The guest's view: git.test resolves to the engine's listener for
	// git.test:443; the client trusts only the guest CA.
	_, port, _ := net.SplitHostPort(h.addr("git.test", 443))
	caFile := filepath.Join(tmp, "guest-ca.pem")
	os.WriteFile(caFile, h.guestCA.CertPEM(), 0o644)
	genv := gitEnv(home, "GIT_SSL_CAINFO="+caFile)
	url := "https://git.test:" + port + "/repo.git"
	resolve := "http.curloptResolve=git.test:" + port + ":127.0.0.1"

	work := filepath.Join(tmp, "work")
	mustGit(t, tmp, genv, "-c", resolve, "clone", "-q", url, work)
	if b, err := os.ReadFile(filepath.Join(work, "README")); err != nil || string(b) != "hello\n" {
		t.Fatalf("clone: README %q %v", b, err)
	}
	os.WriteFile(filepath.Join(work, "README"), []byte("changed\n"), 0o644)
	mustGit(t, work, genv, "commit", "-q", "-am", "second")
	head := strings.TrimSpace(mustGit(t, work, genv, "rev-parse", "HEAD"))

	mustGit(t, work, genv, "-c", resolve, "push", "-q", "origin", "HEAD:refs/heads/agent/x")
	if got := strings.TrimSpace(mustGit(t, bare, env, "rev-parse", "refs/heads/agent/x")); got != head {
		t.Errorf("agent/x is %s after the push, want %s", got, head)
	}

	out, err := runGit(t, work, genv, "-c", resolve, "push", "origin", "HEAD:main")
	if err == nil {
		t.Fatalf("push to main succeeded:\n%s", out)
	}
	t.Logf("git push origin HEAD:main through the engine:\n%s", out)
	if !strings.Contains(out, "[remote rejected]") || !strings.Contains(out, "may update only refs/heads/agent/*") || !strings.Contains(out, "main.hcl:12") {
		t.Errorf("git's output does not carry the reason:\n%s", out)
	}
	// Two refs at once, one outside the patterns: all refused.
	out, err = runGit(t, work, genv, "-c", resolve, "push", "origin", "HEAD:refs/heads/agent/y", "HEAD:refs/tags/v1")
	if err == nil {
		t.Fatalf("push to agent/y and a tag succeeded:\n%s", out)
	}
	if got := strings.TrimSpace(mustGit(t, bare, env, "rev-parse", "main")); got != mainBefore {
		t.Errorf("main moved to %s", got)
	}
	if _, err := runGit(t, bare, env, "rev-parse", "--verify", "-q", "refs/heads/agent/y"); err == nil {
		t.Error("agent/y was created by a push that also touched a tag")
	}
}

// TestGitPushEncodedBodyRefused plays a guest that compresses a push body
// so that its ref updates cannot be read.
func TestGitPushEncodedBodyRefused(t *testing.T) {
	pki := newUpstreamPKI(t)
	reached := make(chan struct{}, 1)
	up := upstreamTLS(t, pki, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached <- struct{}{} }), "git.test")
	rule := policy.AllowRule{Pattern: policy.MustHostPattern("git.test"), GitPush: []string{"refs/heads/agent/*"}, Origin: origin("egress.git", 12)}
	h := newHarness(t, spec(pki, []policy.AllowRule{rule}, mapping("git.test", serverAddr(up))), nil, nil)
	req := mustRequest(t, "POST", "https://git.test/repo.git/git-receive-pack", "\x1f\x8b junk")
	req.Header.Set("Content-Encoding", "gzip")
	res, body := do(t, h.client(false), req)
	if res.StatusCode != 403 || !strings.Contains(body, "gzip-encoded") {
		t.Errorf("%d %q", res.StatusCode, body)
	}
	// Garbage where the commands should be.
	res, body = do(t, h.client(false), mustRequest(t, "POST", "https://git.test/repo.git/git-receive-pack", "zzzz not a pkt-line"))
	if res.StatusCode != 403 {
		t.Errorf("garbage push: %d %q", res.StatusCode, body)
	}
	select {
	case <-reached:
		t.Error("the upstream got a push it should not have")
	default:
	}
}

// TestGitPushDisguised plays a guest that dresses a push to main so that
// a suffix match on the path would miss it.
func TestGitPushDisguised(t *testing.T) {
	pki := newUpstreamPKI(t)
	reached := make(chan string, 10)
	up := upstreamTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached <- r.URL.Path }), "git.test")
	rule := policy.AllowRule{Pattern: policy.MustHostPattern("git.test"), GitPush: []string{"refs/heads/agent/*"}, Origin: origin("egress.git", 12)}
	h := newHarness(t, spec(pki, []policy.AllowRule{rule}, mapping("git.test", serverAddr(up))), nil, nil)
	zero := strings.Repeat("0", 40)
	line := zero + " " + strings.Repeat("a", 40) + " refs/heads/main\x00report-status side-band-64k\n"
	body := fmt.Sprintf("%04x%s0000", len(line)+4, line)
	for _, tc := range []struct{ path, ctype string }{
		{"/repo.git/git-receive-pack", ""},
		{"/repo.git/git-receive-pack/", ""},
		{"/repo.git/GIT-RECEIVE-PACK", ""},
		{"/repo.git/push", "application/x-git-receive-pack-request"},
	} {
		req := mustRequest(t, "POST", "https://git.test"+tc.path, body)
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		res, out := do(t, h.client(false), req)
		if res.StatusCode != 200 || !strings.Contains(out, "may update only refs/heads/agent/*") {
			t.Errorf("POST %s (%q): %d %q", tc.path, tc.ctype, res.StatusCode, out)
		}
	}
	select {
	case p := <-reached:
		t.Errorf("the upstream got a push to %s", p)
	default:
	}
}
