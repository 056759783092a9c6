package agentbridge

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var route = Route{Sbx: "/opt/sbx dir/sbx", ConfigDir: "/src/it's", Sandbox: "dev"}

// preInput is a PreToolUse input for Bash as Claude Code 2.1.332 sends
// it (measured: the fields below and a few this package ignores).
func preInput(t *testing.T, tool string, input any) Input {
	t.Helper()
	ti, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(map[string]any{
		"session_id": "11c0db41-6464-43ad-9d85-e967cf296213", "transcript_path": "/h/.claude/projects/x.jsonl",
		"cwd": "/src", "prompt_id": "p", "permission_mode": "default", "hook_event_name": "PreToolUse",
		"tool_name": tool, "tool_input": json.RawMessage(ti), "tool_use_id": "toolu_0",
	})
	in, err := ReadInput(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// hostileCommands try to end the word they are put in, or the command.
var hostileCommands = []string{
	"uname -n; id -un",
	"'; touch /tmp/pwned; echo '",
	`"$(touch /tmp/pwned)" $HOME`,
	"x\ntouch /tmp/pwned",
	"`touch /tmp/pwned` \\",
	"",
	"sbx agent exec -dir / -sandbox x -session y -b64 eA== ; __HOST__ id",
}

func TestPreToolUseBashRewrites(t *testing.T) {
	for _, cmd := range hostileCommands {
		in := preInput(t, "Bash", map[string]any{"command": cmd, "description": "d", "timeout": 5000, "run_in_background": false})
		d := Decide(in, route)
		if d.Code != 0 || d.Stderr != "" {
			t.Fatalf("%q: code %d, stderr %q", cmd, d.Code, d.Stderr)
		}
		var out struct {
			HookSpecificOutput struct {
				HookEventName      string         `json:"hookEventName"`
				PermissionDecision string         `json:"permissionDecision"`
				UpdatedInput       map[string]any `json:"updatedInput"`
			} `json:"hookSpecificOutput"`
		}
		if err := json.Unmarshal(d.Stdout, &out); err != nil {
			t.Fatalf("%q: %v: %s", cmd, err, d.Stdout)
		}
		h := out.HookSpecificOutput
		if h.HookEventName != "PreToolUse" || h.PermissionDecision != "allow" {
			t.Errorf("%q: %s", cmd, d.Stdout)
		}
		if h.UpdatedInput["description"] != "d" || h.UpdatedInput["timeout"] != 5000.0 || h.UpdatedInput["run_in_background"] != false {
			t.Errorf("%q: the other fields are not kept: %v", cmd, h.UpdatedInput)
		}
		line, _ := h.UpdatedInput["command"].(string)
		if got, ok := Unwrap(line, in.SessionID, route); !ok || got != cmd {
			t.Errorf("%q: Unwrap(%q) = %q, %v", cmd, line, got, ok)
		}
		// What a POSIX shell makes of the line: exactly these words.
		words := shellWords(t, line)
		want := []string{route.Sbx, "agent", "exec", "-dir", route.ConfigDir, "-sandbox", "dev", "-session", in.SessionID, "-b64"}
		if len(words) != len(want)+1 || strings.Join(words[:len(want)], "\x00") != strings.Join(want, "\x00") {
			t.Errorf("%q: the shell splits the line into %q", cmd, words)
		}
	}
}

// shellWords runs line with its first word replaced by printf, in sh,
// and returns the words the shell passed.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	q := shellQuote(route.Sbx)
	if !strings.HasPrefix(line, q) {
		t.Fatalf("%q does not start with %q", line, q)
	}
	script := `printf '%s\0' ` + q + line[len(q):]
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", script, err)
	}
	if _, err := os.Stat("/tmp/pwned"); err == nil {
		t.Fatalf("the shell ran a command of the model's text: /tmp/pwned exists")
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

func TestPreToolUseRefuses(t *testing.T) {
	for _, c := range []struct {
		tool  string
		input any
	}{
		{"Read", map[string]any{"file_path": "/src/.env"}},
		{"Write", map[string]any{"file_path": "/tmp/x", "content": "x"}},
		{"Edit", map[string]any{"file_path": "/tmp/x", "old_string": "a", "new_string": "b"}},
		{"MultiEdit", map[string]any{"file_path": "/tmp/x"}},
		{"Glob", map[string]any{"pattern": "**"}},
		{"Grep", map[string]any{"pattern": "x"}},
		{"Bash", map[string]any{"description": "no command"}},
		{"Bash", map[string]any{"command": 7}},
		{"Bash", []string{"uname"}},
		{"Bash", map[string]any{"COMMAND": "id"}},
		// Tools that run commands, fetch or talk to other processes on
		// the host (measured with 2.1.332: Monitor runs its command on
		// the host, a skill's !`…` lines too), and names not known.
		{"Monitor", map[string]any{"command": "cat .env", "description": "x"}},
		{"Skill", map[string]any{"skill": "pwn"}},
		{"Workflow", map[string]any{}},
		{"WebFetch", map[string]any{"url": "https://example.test/"}},
		{"WebSearch", map[string]any{"query": "x"}},
		{"EnterWorktree", map[string]any{}},
		{"SendMessage", map[string]any{}},
		{"CronCreate", map[string]any{}},
		{"mcp__x__run", map[string]any{"cmd": "id"}},
		{"bash", map[string]any{"command": "id"}},
		{"NewToolOfALaterRelease", map[string]any{}},
	} {
		d := Decide(preInput(t, c.tool, c.input), route)
		if d.Code != 2 || len(d.Stdout) != 0 || !strings.HasPrefix(d.Stderr, "sbx: ") {
			t.Errorf("%s %v: %+v, want a block (exit 2)", c.tool, c.input, d)
		}
	}
	// A tool that touches no host file or process passes untouched.
	for _, tool := range []string{"TodoWrite", "ToolSearch", "Agent", "Task", "ExitPlanMode"} {
		if d := Decide(preInput(t, tool, map[string]any{}), route); d.Code != 0 || len(d.Stdout) != 0 {
			t.Errorf("%s: %+v", tool, d)
		}
	}
	// Installed for every tool, so that none is left unasked.
	if PreToolUseMatcher != "*" {
		t.Errorf("the hooks match %q, not every tool", PreToolUseMatcher)
	}
}

func TestPreToolUseBashKeepsOnlyKnownFields(t *testing.T) {
	in := preInput(t, "Bash", map[string]any{"command": "id", "description": "d", "dangerouslyDisableSandbox": true, "someLaterField": "x"})
	d := Decide(in, route)
	var out struct {
		HookSpecificOutput struct {
			UpdatedInput map[string]any `json:"updatedInput"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal(d.Stdout, &out); err != nil {
		t.Fatalf("%v: %s", err, d.Stdout)
	}
	got := out.HookSpecificOutput.UpdatedInput
	if len(got) != 2 || got["description"] != "d" {
		t.Errorf("the rewritten input keeps %v, want command and description only", got)
	}
}

func TestPostToolUseRefusesOtherTools(t *testing.T) {
	in := preInput(t, "Monitor", map[string]any{"command": "id"})
	in.HookEventName = "PostToolUse"
	if d := Decide(in, route); d.Code != 2 || !strings.Contains(d.Stderr, "Monitor ran on the host") {
		t.Errorf("PostToolUse of Monitor: %+v", d)
	}
	in.ToolName = "TodoWrite"
	if d := Decide(in, route); d.Code != 0 {
		t.Errorf("PostToolUse of TodoWrite: %+v", d)
	}
}

func TestPostToolUseChecksTheCommand(t *testing.T) {
	in := preInput(t, "Bash", map[string]any{"command": "id"})
	in.HookEventName = "PostToolUse"
	for _, c := range []struct {
		cmd   string
		block bool
	}{
		{Wrap("id", in.SessionID, route), false},
		{"id", true},
		{Wrap("id", "other-session", route), true},
		{Wrap("id", in.SessionID, route) + "; id", true},
		{strings.Replace(Wrap("id", in.SessionID, route), "'dev'", "'prod'", 1), true},
	} {
		in.ToolInput, _ = json.Marshal(map[string]string{"command": c.cmd})
		if d := Decide(in, route); (d.Code == 2) != c.block {
			t.Errorf("PostToolUse of %q: %+v, want block %v", c.cmd, d, c.block)
		}
	}
}

func TestReadInput(t *testing.T) {
	for _, bad := range []string{
		``, `{`, `[]`, `{"hook_event_name":"PreToolUse"}`,
		`{"session_id":"../x","hook_event_name":"PreToolUse"}`,
		`{"session_id":"a'b","hook_event_name":"PreToolUse"}`,
		`{"session_id":"abc"}`,
	} {
		if _, err := ReadInput(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadInput(%q) took it", bad)
		}
	}
}

func TestInstallMerges(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, SettingsFile)
	os.MkdirAll(filepath.Dir(path), 0o755)
	user := `{"model":"opus","hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"log-it"}]}],"Stop":[{"hooks":[{"type":"command","command":"bye"}]}]}}`
	os.WriteFile(path, []byte(user), 0o644)
	if _, err := Install(dir, route); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(path)
	if _, err := Install(dir, route); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(path)
	if string(first) != string(second) {
		t.Errorf("a second install changed the file:\n%s\n---\n%s", first, second)
	}
	var s struct {
		Model string
		Hooks map[string][]matcherGroup
	}
	if err := json.Unmarshal(second, &s); err != nil {
		t.Fatal(err)
	}
	if s.Model != "opus" || len(s.Hooks["Stop"]) != 1 || s.Hooks["Stop"][0].Hooks[0].Command != "bye" {
		t.Errorf("the user's settings are not kept: %s", second)
	}
	pre := s.Hooks["PreToolUse"]
	if len(pre) != 2 || pre[0].Hooks[0].Command != "log-it" || pre[1].Matcher != PreToolUseMatcher || pre[1].Hooks[0].Command != HookCommand("PreToolUse", route) {
		t.Errorf("PreToolUse: %+v", pre)
	}
	for _, e := range []string{"PostToolUse", "SessionEnd"} {
		if g := s.Hooks[e]; len(g) != 1 || g[0].Hooks[0].Command != HookCommand(e, route) || g[0].Hooks[0].Timeout != HookTimeout {
			t.Errorf("%s: %+v", e, g)
		}
	}
	// Another route replaces the first one's hooks.
	other := route
	other.Sandbox = "prod"
	if _, err := Install(dir, other); err != nil {
		t.Fatal(err)
	}
	third, _ := os.ReadFile(path)
	if strings.Contains(string(third), "'dev'") || strings.Count(string(third), "'prod'") != 3 {
		t.Errorf("reinstalling for another sandbox:\n%s", third)
	}
}

func TestInstanceName(t *testing.T) {
	a, b := InstanceName("dev", "s1"), InstanceName("dev", "s2")
	if a == b || !strings.HasPrefix(a, "dev-claude-") || len(a) != len("dev-claude-")+12 {
		t.Errorf("%q %q", a, b)
	}
	if id, ok := HolderSession(Holder("s1")); !ok || id != "s1" {
		t.Errorf("HolderSession(Holder(s1)) = %q, %v", id, ok)
	}
}
