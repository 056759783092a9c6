package agentbridge

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Input is the part of a hook's standard input the bridge reads: what
// Claude Code 2.1.332 sends every command hook (session_id, cwd,
// hook_event_name, transcript_path) and, for tool events, the tool's
// name, input and call id.
type Input struct {
	SessionID     string          `json:"session_id"`
	Cwd           string          `json:"cwd"`
	HookEventName string          `json:"hook_event_name"`
	ToolName      string          `json:"tool_name"`
	ToolInput     json.RawMessage `json:"tool_input"`
	ToolUseID     string          `json:"tool_use_id"`
	// Reason is SessionEnd's ("clear", "logout", "other", …).
	Reason string `json:"reason"`
}

// maxInput bounds what ReadInput reads: a tool input holds at most a
// file's content for Write.
const maxInput = 64 << 20

// ReadInput decodes a hook's standard input. Anything but one JSON
// object naming a valid session and an event is an error.
func ReadInput(r io.Reader) (Input, error) {
	var in Input
	data, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return in, fmt.Errorf("reading the hook input: %w", err)
	}
	if len(data) > maxInput {
		return in, fmt.Errorf("the hook input is larger than %d bytes", maxInput)
	}
	if err := json.Unmarshal(data, &in); err != nil {
		return in, fmt.Errorf("the hook input is not JSON: %w", err)
	}
	if err := CheckSessionID(in.SessionID); err != nil {
		return in, err
	}
	if in.HookEventName == "" {
		return in, errors.New("the hook input names no hook_event_name")
	}
	return in, nil
}

// sessionIDPattern is what a session id may be: Claude Code's are UUIDs.
// The id goes into a shell command and a directory name, so nothing
// else is taken.
var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// CheckSessionID returns an error unless id is a session id the bridge
// takes: 1 to 64 letters, digits, '-' and '_', starting with a letter or
// digit.
func CheckSessionID(id string) error {
	if !sessionIDPattern.MatchString(id) {
		return fmt.Errorf("the hook input's session_id %q is not 1 to 64 letters, digits, '-' or '_'", id)
	}
	return nil
}

// Route is where the rewritten command sends a Bash call: the sbx
// executable Claude Code runs (an absolute path), and the configuration
// directory and sandbox block the session's sandbox is made from.
type Route struct {
	Sbx       string // absolute path of the sbx executable
	ConfigDir string // absolute
	Sandbox   string // the sandbox block's name
}

// Decision is what the hook command answers Claude Code: Stdout (a JSON
// object, or empty) and the exit code. Exit code 2 blocks the tool call
// with Stderr as the reason shown to the model.
type Decision struct {
	Stdout []byte
	Stderr string
	Code   int
}

// Block is the decision that refuses the call with reason: exit code 2,
// the one answer Claude Code never takes as leave to run the tool as it
// is. (Measured with 2.1.332: a hook that exits 1, prints something
// other than JSON, or passes its timeout lets the call run unchanged on
// the host.)
func Block(reason string) Decision {
	return Decision{Stderr: "sbx: " + reason + "\n", Code: 2}
}

// innerTools are the tools Claude Code runs in its own process, which
// reach no host file, process or network: they are let through. Every
// other tool — the file tools, and any that runs commands, fetches, or
// talks to other processes (Monitor, Skill, WebFetch, MCP tools, tools a
// later Claude Code adds) — is refused, since only Bash is routed into
// the sandbox. Deny by default: a tool this list does not name never
// reaches the host.
var innerTools = map[string]bool{
	"Agent": true, "Task": true, "TodoWrite": true, "ToolSearch": true, "ExitPlanMode": true,
}

// PreToolUseMatcher is the matcher Install gives the PreToolUse and
// PostToolUse hooks: every tool, so that a tool the hook does not know
// is refused rather than run on the host.
const PreToolUseMatcher = "*"

// IsFileTool reports whether tool is one DecideFile routes.
func IsFileTool(tool string) bool {
	_, ok := fileTools[tool]
	return ok
}

// Decide answers a PreToolUse or PostToolUse hook. PreToolUse on Bash
// allows the call with its command replaced by the sbx agent exec call
// (Wrap) and every other field of the input kept; PreToolUse on a file
// tool blocks it; PostToolUse on Bash blocks (reports to the model) a
// call whose command was not one Wrap makes, which means something other
// than this hook decided it. Other tools and events are let through with
// no output. Whatever cannot be decided is blocked.
func Decide(in Input, r Route) Decision {
	switch in.HookEventName {
	case "PreToolUse":
		switch {
		case in.ToolName == "Bash":
			return preBash(in, r)
		case IsFileTool(in.ToolName):
			// Routed by DecideFile, which needs the session's sandbox.
			return Block(fmt.Sprintf("%s was not routed into the sandbox", in.ToolName))
		case !innerTools[in.ToolName]:
			return Block(fmt.Sprintf("%s is not available: this project's tools run in the sandbox sandbox.%s, where Bash, Read, Write, Edit and MultiEdit are routed; use Bash there instead", in.ToolName, r.Sandbox))
		}
	case "PostToolUse":
		switch {
		case in.ToolName == "Bash":
			cmd, err := command(in.ToolInput)
			if err != nil {
				return Block(err.Error())
			}
			if _, ok := Unwrap(cmd, in.SessionID, r); !ok {
				return Block("this Bash call ran on the host, not in the sandbox: its command is not the one the sbx hook wrote. Check the hooks in .claude/settings.json")
			}
		case IsFileTool(in.ToolName):
			return Block(fmt.Sprintf("%s was not routed into the sandbox", in.ToolName))
		case !innerTools[in.ToolName]:
			return Block(fmt.Sprintf("the tool %s ran on the host, which the sbx hook refuses: check the hooks in .claude/settings.json", in.ToolName))
		}
	}
	return Decision{}
}

// bashFields are the fields of a Bash call's input that the rewritten
// call keeps; any other (one that would change where or how the command
// runs, or one a later Claude Code adds) is dropped.
var bashFields = []string{"command", "description", "timeout", "run_in_background"}

func preBash(in Input, r Route) Decision {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(in.ToolInput, &fields); err != nil || fields == nil {
		return Block("the Bash call's input is not a JSON object")
	}
	cmd, err := command(in.ToolInput)
	if err != nil {
		return Block(err.Error())
	}
	wrapped, err := json.Marshal(Wrap(cmd, in.SessionID, r))
	if err != nil {
		return Block(err.Error())
	}
	kept := map[string]json.RawMessage{"command": wrapped}
	for _, k := range bashFields[1:] {
		if v, ok := fields[k]; ok {
			kept[k] = v
		}
	}
	out, err := json.Marshal(map[string]any{"hookSpecificOutput": map[string]any{
		"hookEventName":            "PreToolUse",
		"permissionDecision":       "allow",
		"permissionDecisionReason": "sbx runs it in sandbox." + r.Sandbox,
		"updatedInput":             kept,
	}})
	if err != nil {
		return Block(err.Error())
	}
	return Decision{Stdout: out}
}

// command returns the command of a Bash call's input: its "command"
// field exactly (JSON object keys are matched as written, not folded).
func command(input json.RawMessage) (string, error) {
	var fields map[string]json.RawMessage
	var cmd string
	if err := json.Unmarshal(input, &fields); err != nil || fields["command"] == nil || json.Unmarshal(fields["command"], &cmd) != nil {
		return "", errors.New("the Bash call's input has no command string")
	}
	return cmd, nil
}

// Wrap returns the host command that runs cmd in session's sandbox:
//
//	'SBX' agent exec -dir 'DIR' -sandbox 'NAME' -session 'ID' -b64 'BASE64'
//
// Every word is single-quoted (a quote inside one is closed, escaped and
// reopened) and the model's command is base64 (standard alphabet, no
// quote, no space, no shell character), so nothing in cmd can end the
// word it is in: the host shell runs sbx with these arguments and
// nothing else.
func Wrap(cmd, session string, r Route) string {
	return strings.Join([]string{
		shellQuote(r.Sbx), "agent", "exec",
		"-dir", shellQuote(r.ConfigDir),
		"-sandbox", shellQuote(r.Sandbox),
		"-session", shellQuote(session),
		"-b64", shellQuote(base64.StdEncoding.EncodeToString([]byte(cmd))),
	}, " ")
}

// Unwrap returns the model's command of a command Wrap made for session
// and r, and whether line is exactly such a command.
func Unwrap(line, session string, r Route) (string, bool) {
	prefix := Wrap("", session, r)
	prefix = strings.TrimSuffix(prefix, "''")
	rest, ok := strings.CutPrefix(line, prefix)
	if !ok {
		return "", false
	}
	b64, ok := strings.CutPrefix(rest, "'")
	if ok {
		b64, ok = strings.CutSuffix(b64, "'")
	}
	if !ok {
		return "", false
	}
	cmd, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || Wrap(string(cmd), session, r) != line {
		return "", false
	}
	return string(cmd), true
}

// shellQuote quotes s as one word for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
