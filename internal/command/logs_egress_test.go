package command

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// TestLogsEgress: "sbx logs -egress" prints the sandbox's audit log one
// readable line per entry (a guest-chosen path escaped), and with -json
// the entries themselves; -egress with -console is refused.
func TestLogsEgress(t *testing.T) {
	rt, err := os.MkdirTemp("", "sbx-rt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	configDir := t.TempDir()
	environ := []string{"SBX_RUNTIME_DIR=" + rt}
	sdir, err := supervisor.SandboxDir(supervisor.RuntimeBase(environ), configDir, "box")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		t.Fatal(err)
	}
	w, err := audit.Open(sdir, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	when := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	w.Log(audit.Entry{Time: when, Proto: "https", Name: "api.example.com", Port: 443, Method: "POST", Path: "/v1/messages",
		Decision: "allow", Status: 200, Rule: "egress.llm", RuleFile: "sbx.hcl", RuleLine: 3, Secrets: []string{"anthropic"}})
	w.Log(audit.Entry{Time: when, Proto: "https", Name: "evil.example.com", Port: 443, Method: "GET", Path: "/x\x1b[2J",
		Decision: "deny", Reason: "no allow rule names evil.example.com"})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	logs := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		code := Run(append(append([]string{"logs"}, args...), configDir, "box"),
			&Env{Stdout: &stdout, Stderr: &stderr, Environ: environ, Context: context.Background()})
		return stdout.String(), stderr.String(), code
	}
	out, stderr, code := logs("-egress")
	if code != ExitOK {
		t.Fatalf("logs -egress: code %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("logs -egress printed %d lines, want 2:\n%s", len(lines), out)
	}
	for _, want := range []string{"allow", "api.example.com:443", "POST /v1/messages", "egress.llm", "sbx.hcl:3", "anthropic"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("line %q lacks %q", lines[0], want)
		}
	}
	if strings.Contains(out, "\x1b") || !strings.Contains(lines[1], "deny") || !strings.Contains(lines[1], "no allow rule") {
		t.Errorf("the denial line is %q: want it escaped, with its decision and reason", lines[1])
	}

	out, _, code = logs("-egress", "-json")
	if code != ExitOK {
		t.Fatalf("logs -egress -json: code %d", code)
	}
	var got []audit.Entry
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e audit.Entry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("logs -egress -json printed %q: %v", l, err)
		}
		got = append(got, e)
	}
	if len(got) != 2 || got[0].Name != "api.example.com" || got[1].Path != "/x\x1b[2J" || !got[0].Time.Equal(when) {
		t.Errorf("logs -egress -json gave %+v", got)
	}

	if _, stderr, code := logs("-egress", "-console"); code == ExitOK || !strings.Contains(stderr, "-egress") {
		t.Errorf("logs -egress -console: code %d, stderr %q; want a refusal", code, stderr)
	}
	if _, stderr, code := logs("-json"); code == ExitOK || !strings.Contains(stderr, "-json") {
		t.Errorf("logs -json: code %d, stderr %q; want a refusal", code, stderr)
	}
}
