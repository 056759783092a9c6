// Package agentbridge connects Claude Code, running on the host, to one
// sbx sandbox per Claude session: it reads the JSON Claude Code hands a
// command hook on standard input and decides what becomes of the tool
// call (Decide), writes the hook configuration into a project's
// .claude/settings.json (Install), and names the sandbox of a session
// (InstanceName).
//
// The route of a Bash call is a rewrite: the hook answers "allow" with
// the command replaced by a call of "sbx agent exec" that carries the
// model's command base64-encoded, so that Claude Code's host shell only
// ever runs sbx, which runs the command in the session's sandbox. File
// tools (Read, Write, Edit, MultiEdit, NotebookEdit, Glob, Grep) are
// refused until they are routed. See docs/agents.md and
// docs/decisions/0017-agent-bridge.md for the protocol as measured and
// the security argument.
//
// It does not start, reach or stop sandboxes: package command does, with
// package supervisor. It never prints: Decide returns the bytes and the
// exit code the hook command gives Claude Code.
package agentbridge
