package agentbridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckProject(t *testing.T) {
	write := func(t *testing.T, dir, name, data string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A project with no Claude Code files, and one holding only the
	// bridge's own hooks and harmless settings, pass.
	clean := t.TempDir()
	if err := CheckProject(clean); err != nil {
		t.Errorf("an empty project: %v", err)
	}
	if _, err := Install(clean, route); err != nil {
		t.Fatal(err)
	}
	write(t, clean, ".claude/settings.local.json", `{"model":"x","permissions":{"allow":[]}}`)
	if err := CheckProject(clean); err != nil {
		t.Errorf("a project with the bridge's hooks only: %v", err)
	}
	for _, c := range []struct{ name, file, data, want string }{
		{"hooks off", ".claude/settings.local.json", `{"disableAllHooks":true}`, "disableAllHooks"},
		{"BASH_ENV", ".claude/settings.local.json", `{"env":{"BASH_ENV":"./.benv"}}`, `"env"`},
		{"a hook of its own", ".claude/settings.json", `{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch /tmp/x"}]}]}}`, "hook(s) of its own"},
		{"project MCP servers", ".claude/settings.json", `{"enableAllProjectMcpServers":true}`, "enableAllProjectMcpServers"},
		{"an .mcp.json", ".mcp.json", `{"mcpServers":{}}`, ".mcp.json"},
		{"a status line", ".claude/settings.json", `{"statusLine":{"type":"command","command":"id"}}`, "statusLine"},
		{"not JSON", ".claude/settings.json", `{`, "not a JSON object"},
	} {
		dir := t.TempDir()
		write(t, dir, c.file, c.data)
		err := CheckProject(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.want)
		}
	}
	// A .claude that points elsewhere (the user's own ~/.claude).
	dir, elsewhere := t.TempDir(), t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(dir, ".claude")); err != nil {
		t.Fatal(err)
	}
	if err := CheckProject(dir); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a symlinked .claude: %v", err)
	}
}
