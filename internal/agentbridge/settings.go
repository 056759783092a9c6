package agentbridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbx-dev/sbx/internal/atomicfile"
)

// SettingsFile is where Install writes, under the project directory.
const SettingsFile = ".claude/settings.json"

// HookTimeout is the timeout, in seconds, Install gives each hook: the
// hook decides from its input alone, in milliseconds, so it is far from
// the bound even on a loaded host (past it Claude Code would run the
// call unchanged).
const HookTimeout = 30

// hookEvents are the events Install hooks, with their matchers ("" for
// events that have none).
var hookEvents = []struct{ event, matcher string }{
	{"PreToolUse", PreToolUseMatcher},
	{"PostToolUse", PreToolUseMatcher},
	{"SessionEnd", ""},
}

// HookCommand is the command line Claude Code runs for event: sbx's
// "agent hook" verb with the route in its arguments.
func HookCommand(event string, r Route) string {
	return strings.Join([]string{shellQuote(r.Sbx), "agent", "hook",
		"-dir", shellQuote(r.ConfigDir), "-sandbox", shellQuote(r.Sandbox), event}, " ")
}

// isOurs reports whether a hook command is one HookCommand wrote, for
// any route: its second and third words are "agent hook".
func isOurs(cmd string) bool {
	_, rest, ok := strings.Cut(cmd, "' agent hook ")
	return ok && strings.HasPrefix(cmd, "'") && rest != ""
}

// Install writes the hooks that route r's tool calls into
// project/.claude/settings.json, creating it, or merging them into it:
// every other key and every other hook is kept, hooks of an earlier
// Install are replaced, so that installing twice changes nothing. The
// file is replaced whole (a temporary file renamed over it).
func Install(project string, r Route) (string, error) {
	path := filepath.Join(project, SettingsFile)
	if fi, err := os.Lstat(filepath.Dir(path)); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return path, fmt.Errorf("%s is a symbolic link: the hooks would be written where it points", filepath.Dir(path))
	}
	settings := map[string]json.RawMessage{}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if len(bytes.TrimSpace(data)) > 0 {
			if err := json.Unmarshal(data, &settings); err != nil {
				return path, fmt.Errorf("%s is not a JSON object: %w", path, err)
			}
		}
	case errors.Is(err, os.ErrNotExist):
	default:
		return path, err
	}
	merged, err := MergeHooks(settings["hooks"], r)
	if err != nil {
		return path, fmt.Errorf("%s: %w", path, err)
	}
	settings["hooks"] = merged
	out, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return path, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return path, err
	}
	return path, atomicfile.WriteBytes(path, append(out, '\n'), 0o644)
}

// matcherGroup is one entry of a hook event's list in settings.json.
type matcherGroup struct {
	Matcher string        `json:"matcher,omitempty"`
	Hooks   []hookCommand `json:"hooks"`
}

type hookCommand struct {
	Type    string `json:"type"`
	Command string `json:"command"`
	Timeout int    `json:"timeout,omitempty"`
}

// MergeHooks returns the "hooks" value of settings.json with the
// bridge's hooks for r: groups holding only hooks of an earlier install
// are dropped, hooks of ours are taken out of other groups, and one group
// per event is appended. Groups and events of others are kept as they
// are.
func MergeHooks(hooks json.RawMessage, r Route) (json.RawMessage, error) {
	events := map[string][]json.RawMessage{}
	if len(hooks) > 0 && string(hooks) != "null" {
		if err := json.Unmarshal(hooks, &events); err != nil {
			return nil, fmt.Errorf(`"hooks" is not an object of event lists: %w`, err)
		}
	}
	for _, e := range hookEvents {
		var kept []json.RawMessage
		for _, raw := range events[e.event] {
			g := map[string]json.RawMessage{}
			if json.Unmarshal(raw, &g) != nil {
				kept = append(kept, raw)
				continue
			}
			var list []map[string]json.RawMessage
			if json.Unmarshal(g["hooks"], &list) != nil {
				kept = append(kept, raw)
				continue
			}
			var others []map[string]json.RawMessage
			for _, h := range list {
				var cmd string
				json.Unmarshal(h["command"], &cmd)
				if !isOurs(cmd) {
					others = append(others, h)
				}
			}
			if len(others) == len(list) {
				kept = append(kept, raw)
				continue
			}
			if len(others) == 0 {
				continue
			}
			b, err := json.Marshal(others)
			if err != nil {
				return nil, err
			}
			g["hooks"] = b
			b, err = json.Marshal(g)
			if err != nil {
				return nil, err
			}
			kept = append(kept, b)
		}
		ours, err := json.Marshal(matcherGroup{Matcher: e.matcher, Hooks: []hookCommand{{Type: "command", Command: HookCommand(e.event, r), Timeout: HookTimeout}}})
		if err != nil {
			return nil, err
		}
		events[e.event] = append(kept, ours)
	}
	return json.Marshal(events)
}
