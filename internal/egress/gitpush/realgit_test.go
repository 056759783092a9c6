package gitpush

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/policy/match"
)

// gitEnv isolates git from the host's configuration.
func gitEnv(home string) []string {
	return []string{
		"HOME=" + home, "PATH=" + os.Getenv("PATH"),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.test",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.test",
		"LC_ALL=C",
	}
}

type gitRepo struct {
	t    *testing.T
	dir  string
	env  []string
	bare string
}

func (g *gitRepo) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = g.dir
	cmd.Env = g.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (g *gitRepo) must(args ...string) string {
	g.t.Helper()
	out, err := g.run(args...)
	if err != nil {
		g.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

// newRepos makes a bare repository served over smart HTTP and a working
// clone-to-be with one commit on main.
func newRepos(t *testing.T) *gitRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed: ", err)
	}
	tmp := t.TempDir()
	g := &gitRepo{t: t, dir: filepath.Join(tmp, "work"), env: gitEnv(tmp), bare: filepath.Join(tmp, "srv", "repo.git")}
	if err := os.MkdirAll(g.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	g.must("init", "-q", "--bare", "-b", "main", g.bare)
	g.must("-C", g.bare, "config", "http.receivepack", "true")
	g.must("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(g.dir, "f"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g.must("add", "f")
	g.must("commit", "-q", "-m", "one")
	return g
}

func backend(t *testing.T, g *gitRepo) http.Handler {
	execPath := strings.TrimSpace(g.must("--exec-path"))
	return &cgi.Handler{
		Path: filepath.Join(execPath, "git-http-backend"),
		Env: []string{
			"GIT_PROJECT_ROOT=" + filepath.Dir(g.bare),
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1",
			"HOME=" + filepath.Dir(g.dir),
		},
	}
}

type capture struct {
	mu       sync.Mutex
	cmds     []Command
	caps     []string
	consumed []byte
	err      error
}

// inspectingServer serves the bare repository, parsing each push's
// commands and replaying them upstream (to git http-backend) followed by
// the rest of the body: if ParseCommands consumed any byte more or less
// than it returned, the push fails.
func inspectingServer(t *testing.T, g *gitRepo, c *capture) string {
	be := backend(t, g)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
			if r.Header.Get("Content-Encoding") != "" {
				t.Errorf("push body encoded %q", r.Header.Get("Content-Encoding"))
			}
			cmds, consumed, caps, err := ParseCommands(r.Body, 1<<20)
			c.mu.Lock()
			c.cmds, c.consumed, c.caps, c.err = cmds, consumed, caps, err
			c.mu.Unlock()
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(consumed), r.Body))
			r.ContentLength = -1
		}
		be.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/repo.git"
}

func TestParseRealPushes(t *testing.T) {
	g := newRepos(t)
	var c capture
	url := inspectingServer(t, g, &c)
	g.must("remote", "add", "origin", url)
	zero := strings.Repeat("0", 40)
	head1 := g.must("rev-parse", "HEAD")

	check := func(what string, want []Command) {
		t.Helper()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.err != nil {
			t.Fatalf("%s: %v", what, c.err)
		}
		if len(c.cmds) != len(want) {
			t.Fatalf("%s: commands %+v, want %+v", what, c.cmds, want)
		}
		for i := range want {
			if c.cmds[i] != want[i] {
				t.Errorf("%s: command %d %+v, want %+v", what, i, c.cmds[i], want[i])
			}
		}
		if !bytes.HasSuffix(c.consumed, []byte("0000")) {
			t.Errorf("%s: consumed does not end at the flush-pkt: %q", what, c.consumed)
		}
		if !containsAll(c.caps, "side-band-64k") || !(containsAll(c.caps, "report-status") || containsAll(c.caps, "report-status-v2")) {
			t.Errorf("%s: caps %v lack report-status or side-band-64k", what, c.caps)
		}
		t.Logf("%s: body starts %q", what, c.consumed)
	}

	g.must("push", "-q", "origin", "main")
	check("create main", []Command{{zero, head1, "refs/heads/main"}})
	if !c.cmds[0].IsCreate() || c.cmds[0].IsDelete() {
		t.Error("create not recognised")
	}

	if err := os.WriteFile(filepath.Join(g.dir, "f"), []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g.must("commit", "-q", "-am", "two")
	head2 := g.must("rev-parse", "HEAD")
	g.must("push", "-q", "origin", "main", "main:refs/heads/agent/x", "main:refs/tags/v1")
	check("update and two creates", []Command{
		{head1, head2, "refs/heads/main"},
		{zero, head2, "refs/heads/agent/x"},
		{zero, head2, "refs/tags/v1"},
	})

	g.must("push", "-q", "origin", ":agent/x")
	check("delete", []Command{{head2, zero, "refs/heads/agent/x"}})
	if !c.cmds[0].IsDelete() {
		t.Error("delete not recognised")
	}
	// The pushes really reached the repository through the replay.
	if got := g.must("-C", g.bare, "rev-parse", "main"); got != head2 {
		t.Errorf("upstream main %s, want %s", got, head2)
	}
	if out, err := g.run("-C", g.bare, "rev-parse", "--verify", "-q", "agent/x"); err == nil {
		t.Errorf("agent/x still upstream: %s", out)
	}
}

func containsAll(have []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

// rejectingServer serves fetches and ref advertisement from the bare
// repository and refuses pushes touching refs outside patterns.
func rejectingServer(t *testing.T, g *gitRepo, patterns []string, reason string) string {
	be := backend(t, g)
	var pats []*match.Ref
	for _, p := range patterns {
		r, err := match.CompileRef(p)
		if err != nil {
			t.Fatal(err)
		}
		pats = append(pats, r)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
			cmds, consumed, caps, err := ParseCommands(r.Body, 1<<20)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			for _, c := range cmds {
				if !match.AnyRef(pats, c.Ref) {
					io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20))
					if err := Reject(w, cmds, caps, reason); err != nil {
						t.Error(err)
					}
					return
				}
			}
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(consumed), r.Body))
			r.ContentLength = -1
		}
		be.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/repo.git"
}

func TestRealGitShowsRejectReason(t *testing.T) {
	g := newRepos(t)
	g.must("push", "-q", g.bare, "main")
	reason := "ref not allowed by egress.git (sbx.hcl:7)"
	url := rejectingServer(t, g, []string{"refs/heads/agent/*"}, reason)
	g.must("remote", "add", "origin", url)

	g.must("clone", "-q", url, filepath.Join(t.TempDir(), "clone"))

	if err := os.WriteFile(filepath.Join(g.dir, "f"), []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g.must("commit", "-q", "-am", "two")
	before := g.must("-C", g.bare, "rev-parse", "main")

	out, err := g.run("push", "origin", "main")
	if err == nil {
		t.Fatalf("push to main succeeded:\n%s", out)
	}
	if want := " ! [remote rejected] main -> main (" + reason + ")"; !strings.Contains(out, want) {
		t.Errorf("git output lacks %q:\n%s", want, out)
	}
	if after := g.must("-C", g.bare, "rev-parse", "main"); after != before {
		t.Error("rejected push changed the repository")
	}

	// A push only to allowed refs goes through.
	g.must("push", "-q", "origin", "main:refs/heads/agent/x")
	if got, want := g.must("-C", g.bare, "rev-parse", "agent/x"), g.must("rev-parse", "HEAD"); got != want {
		t.Errorf("agent/x %s, want %s", got, want)
	}

	// One disallowed ref among allowed ones refuses the whole push.
	out, err = g.run("push", "origin", "main:refs/heads/agent/y", "main:refs/heads/other")
	if err == nil {
		t.Fatalf("mixed push succeeded:\n%s", out)
	}
	if !strings.Contains(out, "main -> other ("+reason+")") || !strings.Contains(out, "main -> agent/y ("+reason+")") {
		t.Errorf("git output:\n%s", out)
	}
	if _, err := g.run("-C", g.bare, "rev-parse", "--verify", "-q", "agent/y"); err == nil {
		t.Error("agent/y created by a refused push")
	}
}
