package agentbridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// riskyKeys are settings with which a project's own Claude Code files
// turn the bridge off or run something on the host around it: hooks off,
// an environment for every command (BASH_ENV runs a file before each
// Bash call, wrapped or not), helpers and status lines that are host
// commands, and project MCP servers, which Claude Code starts on the
// host.
var riskyKeys = []string{"disableAllHooks", "env", "apiKeyHelper", "statusLine", "enableAllProjectMcpServers", "enabledMcpjsonServers"}

// CheckProject returns an error when project's own Claude Code files
// hold what would make tool calls run on the host despite the bridge's
// hooks: a .claude that is a symbolic link (Install would write through
// it), hooks other than the bridge's, a risky setting (riskyKeys) in
// .claude/settings.json or .claude/settings.local.json, or an .mcp.json.
// A checkout can carry any of them; the user decides (sbx agent install
// -force) after reading them.
func CheckProject(project string) error {
	dir := filepath.Join(project, ".claude")
	if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link: the hooks would be written where it points", dir)
	}
	var found []string
	for _, name := range []string{"settings.json", "settings.local.json"} {
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		settings := map[string]json.RawMessage{}
		if err := json.Unmarshal(data, &settings); err != nil {
			return fmt.Errorf("%s is not a JSON object: %w", path, err)
		}
		for _, k := range riskyKeys {
			if _, ok := settings[k]; ok {
				found = append(found, fmt.Sprintf("%q in %s", k, path))
			}
		}
		if n := otherHooks(settings["hooks"]); n > 0 {
			found = append(found, fmt.Sprintf("%d hook(s) of its own in %s", n, path))
		}
	}
	if _, err := os.Lstat(filepath.Join(project, ".mcp.json")); err == nil {
		found = append(found, filepath.Join(project, ".mcp.json")+" (MCP servers Claude Code starts on the host)")
	}
	if len(found) > 0 {
		slices.Sort(found)
		return fmt.Errorf("the project's Claude Code files hold what runs on the host around the sandbox: %s. Read them; install with -force to keep them", strings.Join(found, "; "))
	}
	return nil
}

// otherHooks counts the hook commands in a settings "hooks" value that
// are not the bridge's (an unreadable value counts as one).
func otherHooks(hooks json.RawMessage) int {
	if len(hooks) == 0 || string(hooks) == "null" {
		return 0
	}
	var events map[string][]struct {
		Hooks []struct {
			Command string `json:"command"`
		} `json:"hooks"`
	}
	if json.Unmarshal(hooks, &events) != nil {
		return 1
	}
	n := 0
	for _, groups := range events {
		for _, g := range groups {
			for _, h := range g.Hooks {
				if !isOurs(h.Command) {
					n++
				}
			}
		}
	}
	return n
}
