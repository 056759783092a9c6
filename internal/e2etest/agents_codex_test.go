//go:build linux

package e2etest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/audit"
)

// TestCodexInVM runs the real Codex CLI (the npm static musl build) in
// the "codex" sandbox of examples/agent-debian, as the non-root user in
// the mounted worktree, with CODEX_API_KEY brokered: the guest holds a
// placeholder, the host puts the real key into requests to
// api.openai.com only. api.openai.com is the fake Responses API
// (openaiFake), which refuses any other credential and scripts a turn: a
// tool call that writes a file in the working directory, then a final
// message once the tool's output has come back.
//
// Codex runs twice in one sandbox: first with the fake taking the
// WebSocket upgrade, so that the whole turn rides on it (the placeholder
// substituted in the upgrade request's header), then with the fake
// refusing the upgrade, so that Codex falls back to POSTs over HTTP/2.
// Each run must write the file in the host's worktree. What Codex sends
// elsewhere — its key to chatgpt.com's model list, names the spec does
// not allow (telemetry, plugin sources) — must be refused, fast, and the
// refusals of the key be in the audit log. No real value may be anywhere
// in the guest or what came out of it.
func TestCodexInVM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	fake := &openaiFake{key: codexKey}
	a := startAgentSandbox(t, ctx, agentSpec{Sandbox: "codex", Secrets: []string{"CODEX_API_KEY=" + codexKey}, Upstream: fake})
	placeholder := a.Placeholders["CODEX_API_KEY"]

	out, code, took := a.Run(t, ctx, "", 3*time.Minute, `set -e; id -un; echo "HOME=$HOME"; codex --version`)
	t.Logf("codex --version took %v", took.Round(time.Millisecond))
	if code != 0 || !strings.HasPrefix(out, "agent\n") || !strings.Contains(out, "codex-cli "+codexVersion) {
		t.Fatalf("the image's codex: exit %d\n%s", code, out)
	}

	// Under TCG the 300 MB executable starts in tens of seconds and each
	// turn's tool runs in a fresh shell: a run gets minutes, and one that
	// waited on a refused call would not finish in them.
	const bound = 6 * time.Minute
	for _, c := range []struct {
		name      string
		refuseWS  bool
		transport string
	}{
		{"websocket", false, "ws"},
		{"http2 fallback", true, "HTTP/2.0"},
	} {
		if !t.Run(c.name, func(t *testing.T) {
			fake.refuseWS.Store(c.refuseWS)
			// Over HTTP the final message quotes the credential the
			// fake got, which must reach the guest as the placeholder.
			// The fake does not echo the key on the WebSocket; echoes in
			// frames are masked too, which internal/egress and
			// internal/sandbox/sandboxnet test (docs/security.md).
			fake.echoPost.Store(c.refuseWS)
			before := len(fake.turnsSoFar())
			hostFile := filepath.Join(a.Work, codexFile)
			os.Remove(hostFile)

			args := codexArgs("codex", "/workspace", "Write the file "+codexFile+", then say so.")
			out, code, took := a.Run(t, ctx, "", bound, shellQuote(args))
			t.Logf("codex exec took %v:\n%s", took.Round(time.Millisecond), out)
			for _, o := range fake.oddities {
				t.Logf("fake: %s", o)
			}
			if code != 0 || !strings.Contains(out, codexFinal) {
				t.Errorf("codex exec: exit %d", code)
			}
			if c.refuseWS && !strings.Contains(out, "upstream saw [Bearer "+placeholder+"]") {
				t.Errorf("the echoed key did not reach the guest masked to %s", placeholder)
			}
			got, err := os.ReadFile(hostFile)
			if err != nil || string(got) != codexContent+"\n" {
				t.Errorf("the host's worktree: %q, %v; want %q", got, err, codexContent+"\n")
			}
			if st := hostGit(t, a.Work, "status", "--porcelain", "--untracked-files=all"); st != "?? "+codexFile {
				t.Errorf("git status on the host:\n%s", st)
			}

			turns := fake.turnsSoFar()[before:]
			t.Logf("turns: %+v", turns)
			var kinds []string
			for _, tr := range turns {
				if tr.kind == "prewarm" {
					continue
				}
				kinds = append(kinds, tr.kind)
				if tr.transport != c.transport {
					t.Errorf("a %s turn went over %s, want %s", tr.kind, tr.transport, c.transport)
				}
				if tr.kind == "final" && !strings.Contains(tr.output, "exited with code 0") {
					t.Errorf("the tool's output as Codex sent it back: %q", tr.output)
				}
			}
			if !slices.Equal(kinds, []string{"tool", "final"}) {
				t.Errorf("turns %v, want the tool call then the final answer", kinds)
			}
		}) {
			break
		}
	}

	// The fake got the real key, and only on the Responses API: the
	// upgrade (substituted in its header) and the POSTs. Nothing carrying
	// the key reached another host or path.
	reqs := fake.requests(func(openaiReq) bool { return true })
	var seen []string
	for _, r := range reqs {
		seen = append(seen, fmt.Sprintf("%s %s %s%s ws=%v auth=%v", r.proto, r.method, r.host, r.path, r.ws, r.auth != ""))
		if r.auth != "" && (r.host != "api.openai.com" || r.path != "/v1/responses") {
			t.Errorf("a credential reached %s %s%s", r.method, r.host, r.path)
		}
		if r.host == "api.openai.com" && r.auth != "Bearer "+codexKey {
			t.Errorf("%s %s%s came without the real key: %q", r.method, r.host, r.path, r.auth)
		}
	}
	t.Logf("the fake got:\n%s", strings.Join(seen, "\n"))
	if n := len(fake.requests(func(r openaiReq) bool { return r.ws && r.auth == "Bearer "+codexKey })); n == 0 {
		t.Error("no WebSocket upgrade reached the fake with the real key")
	}

	// Codex's key to chatgpt.com (its model list) was refused by the
	// host, as the placeholder of a secret bound to another host, and
	// logged with the reason; so were the names the spec does not allow.
	entries := a.Audit(t, func(e audit.Entry) bool {
		return e.Decision == audit.DecisionDeny && e.Name == "chatgpt.com" && strings.Contains(e.Reason, "codex_key")
	})
	var denied []string
	for _, e := range entries {
		if e.Decision != audit.DecisionDeny {
			continue
		}
		if e.Reason == "" {
			t.Errorf("a refusal without a reason: %s", audit.Format(e))
		}
		denied = append(denied, fmt.Sprintf("%s %s %s %s: %s", e.Name, e.Dst, e.Method, e.Path, e.Reason))
	}
	sort.Strings(denied)
	t.Logf("refused:\n%s", strings.Join(slices.Compact(denied), "\n"))
	if !slices.ContainsFunc(entries, func(e audit.Entry) bool {
		return e.Decision == audit.DecisionDeny && e.Name == "chatgpt.com" && strings.Contains(e.Reason, "codex_key")
	}) {
		// Codex sends its key to chatgpt.com from a timer of its own
		// (its model list), which a slow run may not reach: then there
		// was nothing to refuse. That no credential reached chatgpt.com
		// is checked above whatever Codex did; the refusal itself is
		// sandboxnet's TestSandboxNetwork's, with a client that always
		// sends it.
		t.Logf("Codex sent no key to chatgpt.com in this run; the audit log:\n%s", formatAudit(entries))
	}

	// The engine's side of the same: the upgrade and the POSTs allowed
	// with codex_key substituted, and every refusal decided at once.
	for _, want := range []struct{ proto, method string }{{"ws", "GET"}, {"h2", "POST"}} {
		if !slices.ContainsFunc(entries, func(e audit.Entry) bool {
			return e.Decision == audit.DecisionAllow && e.Proto == want.proto && e.Name == "api.openai.com" &&
				e.Method == want.method && e.Path == "/v1/responses" && slices.Contains(e.Secrets, "codex_key")
		}) {
			t.Errorf("no %s %s /v1/responses allowed with codex_key substituted in the audit log:\n%s", want.proto, want.method, formatAudit(entries))
		}
	}
	for _, e := range entries {
		if e.Decision == audit.DecisionDeny && e.Duration > 2*time.Second {
			t.Errorf("a refusal took %v: %s", e.Duration, audit.Format(e))
		}
	}

	// The placeholder is what the guest holds; the real key is nowhere.
	if !strings.HasPrefix(placeholder, "sbx_ph_") {
		t.Errorf("CODEX_API_KEY in the guest: %q", placeholder)
	}
	a.CheckNoLeak(t, ctx)
}

// shellQuote joins args into one bash command line, each quoted.
func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
