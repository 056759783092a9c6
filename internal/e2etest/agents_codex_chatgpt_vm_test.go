//go:build linux

package e2etest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/oauth"
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

// TestCodexChatGPTInVM runs the real Codex CLI in sandboxes in
// ChatGPT-login mode: the host holds ~/.codex/auth.json's real tokens
// (a secret with oauth and file blocks), the guest a copy with
// placeholders, and chatgpt.com and auth.openai.com are chatgptFake.
// A sandbox started on a fresh login runs a turn of codex exec, which
// must write the scripted file without refreshing. Then two sandboxes
// (two VMs, each with its own network and broker of the login) are
// started from one configuration after the host's access token expired,
// and run a turn at the same time: each Codex reads the expiry from its
// placeholder's claims and refreshes, the token endpoint gets the real
// refresh token exactly once (the first refresh is held there until the
// second sandbox's broker waits on the login's lock, or the second
// refresh arrives), the host's auth.json holds the rotated tokens, and
// both turns reach the backend with the new access token. In no sandbox
// is a real token (a refresh token, a JWT's signature, of either
// generation) in the guest's files — its auth.json as Codex left it
// included —, its processes' environments or what came out of it.
func TestCodexChatGPTInVM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	fake := &chatgptFake{api: &openaiFake{key: codexKey}, gen: 1, cur: chatgptGeneration(1, time.Now().Add(time.Hour))}
	first := fake.current()
	held := &refreshHold{}
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/token" {
			held.wait(r.Context())
		}
		fake.ServeHTTP(w, r)
	})

	start := func(t *testing.T, data []byte) *agentSandbox {
		return startAgentSandbox(t, ctx, agentSpec{Sandbox: "codex_chatgpt", Upstream: upstream,
			Config: map[string][]byte{"chatgpt.hcl": []byte(codexChatGPTSpec), "codex-auth.json": data}})
	}
	// placeholder records the guest's $CHATGPT_ACCESS_TOKEN, which
	// CheckNoLeak looks for in its processes' environments.
	placeholder := func(t *testing.T, a *agentSandbox) {
		ph, code, _ := a.Run(t, ctx, "root", 60*time.Second, `printf %s "$CHATGPT_ACCESS_TOKEN"`)
		if code != 0 || strings.Count(ph, ".") != 2 {
			t.Fatalf("$CHATGPT_ACCESS_TOKEN in the guest: exit %d %.40q", code, ph)
		}
		a.Placeholders["CHATGPT_ACCESS_TOKEN"] = ph
	}
	// turn runs a codex turn in a and checks its output and the guest's
	// auth.json afterwards; safe to call from several goroutines.
	turn := func(t *testing.T, a *agentSandbox) {
		args := codexArgs("codex", "/workspace", "Write the file "+codexFile+", then say so.")
		out, code, took := a.Run(t, ctx, "", 8*time.Minute, shellQuote(args))
		t.Logf("codex exec took %v:\n%s", took.Round(time.Millisecond), out)
		if code != 0 || !strings.Contains(out, codexFinal) {
			t.Errorf("codex exec: exit %d", code)
		}
		guest, code, _ := a.Run(t, ctx, "root", 60*time.Second, `cat /home/agent/.codex/auth.json`)
		if code != 0 {
			t.Errorf("the guest's auth.json: exit %d\n%s", code, guest)
			return
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
	}
	worktree := func(t *testing.T, a *agentSandbox) {
		if got, err := os.ReadFile(filepath.Join(a.Work, codexFile)); err != nil || string(got) != codexContent+"\n" {
			t.Errorf("the host's worktree: %q, %v; want %q", got, err, codexContent+"\n")
		}
	}

	t.Run("turn", func(t *testing.T) {
		a := start(t, chatgptAuthFile(first))
		placeholder(t, a)
		turn(t, a)
		fake.checkBackend(t)
		worktree(t, a)
		if len(fake.refreshs) != 0 {
			t.Errorf("codex refreshed a login that had not expired: %d refreshes", len(fake.refreshs))
		}
		a.secrets = first.secrets()
		a.CheckNoLeak(t, ctx)
	})
	if t.Failed() {
		return
	}
	t.Run("two sandboxes on one expired login", func(t *testing.T) {
		expired := fake.expire()
		a := start(t, chatgptAuthFile(expired))
		b := a.Another(t, ctx, "codex_chatgpt")
		placeholder(t, a)
		placeholder(t, b)
		hostFile := filepath.Join(a.Config, "codex-auth.json")
		held.arm(oauth.LockPath(hostFile), 2*time.Minute)
		var wg sync.WaitGroup
		for _, s := range []*agentSandbox{a, b} {
			wg.Add(1)
			go func() { defer wg.Done(); turn(t, s) }()
		}
		wg.Wait()
		t.Logf("the first refresh was held until %s", held.result())
		fake.checkBackend(t)
		worktree(t, a)
		fake.checkRefreshed(t, expired, hostFile)
		for _, s := range []*agentSandbox{a, b} {
			s.secrets = append(first.secrets(), fake.current().secrets()...)
			s.CheckNoLeak(t, ctx)
		}
	})
}

// refreshHold holds the first request to the token endpoint after arm
// until a second one arrives (two brokers refreshing at once), or a
// process waits for an flock on the login's lock file (the second
// broker queued behind the first, as /proc/locks shows it), or the
// bound passes: so the test sees two refreshes overlap whenever they
// would, and proves the lock makes them one.
type refreshHold struct {
	mu      sync.Mutex
	lock    string
	bound   time.Duration
	n       int
	outcome string
}

func (h *refreshHold) arm(lock string, bound time.Duration) {
	h.mu.Lock()
	h.lock, h.bound, h.n, h.outcome = lock, bound, 0, "not held"
	h.mu.Unlock()
}

func (h *refreshHold) result() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.outcome
}

func (h *refreshHold) wait(ctx context.Context) {
	h.mu.Lock()
	h.n++
	n, lock, bound := h.n, h.lock, h.bound
	h.mu.Unlock()
	if lock == "" || n != 1 {
		return
	}
	outcome := "the bound passed"
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		h.mu.Lock()
		second := h.n > 1
		h.mu.Unlock()
		if second {
			outcome = "a second refresh reached the token endpoint"
			break
		}
		if flockWaiter(lock) {
			outcome = "a broker waited on the login's lock"
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.mu.Lock()
	h.outcome = outcome
	h.mu.Unlock()
}

// flockWaiter reports whether /proc/locks shows a process blocked on an
// flock of the file at path.
func flockWaiter(path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	data, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false
	}
	ino := fmt.Sprintf(":%d ", st.Ino)
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "->") && strings.Contains(line, "FLOCK") && strings.Contains(line, ino) {
			return true
		}
	}
	return false
}
