//go:build linux

package e2etest

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// bridgeFilesSpec is added to the fixture's spec: a sandbox with the
// host directory work mounted read-write at /workspace, secret.txt
// hidden.
const bridgeFilesSpec = `
vfs "work" {
  mount "/workspace" {
    host   = "work"
    access = "rw"
    hide   = ["secret.txt"]
  }
}

sandbox "ws" {
  image  = image.box
  user   = "agent"
  vfs    = [vfs.work]
  cpus   = 1
  memory = "512MiB"
}
`

// createdAt is the path in Write's result ("File created successfully
// at: PATH (…").
var createdAt = regexp.MustCompile(`created successfully at: (\S+)`)

// TestClaudeCodeToolsInSandbox runs the real Claude Code on the host
// with the hooks of "sbx agent install claude" against a fake Messages
// API whose script uses one session's sandbox as a model would: the
// shell's exported variables, working directory and background
// processes last from one Bash call to the next; Write, Edit and Read
// of a file outside every mount reach the guest's file (through the
// session's shadow copy) and never the host's path; an Edit of a file in
// the mount changes the host's file; a Read of a hidden file is refused
// naming the rule. Each tool_result is checked against what the guest
// has (Bash calls read it back), and the PostToolUse check must never
// have reported a call that ran on the host.
func TestClaudeCodeToolsInSandbox(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	exe := claudeExecutable(ctx, t)
	base, err := os.ReadFile(filepath.Join(dir, "sbx.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(t.TempDir(), "sbx.hcl")
	if err := os.WriteFile(specPath, append(base, bridgeFilesSpec...), 0o644); err != nil {
		t.Fatal(err)
	}
	w := newBridgeWorldFrom(t, specPath)
	if h, _ := os.Hostname(); h == "ws" {
		t.Fatalf("the host is named %q, as the guest is", h)
	}
	work := filepath.Join(w.cfgDir, "work")
	os.Mkdir(work, 0o755)
	hello := filepath.Join(work, "hello.txt")
	secret := filepath.Join(work, "secret.txt")
	if err := os.WriteFile(hello, []byte("hello host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("top secret value\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A guest-only path the host must never get.
	note := fmt.Sprintf("/tmp/sbx-note-%d", time.Now().UnixNano())
	w.sbx(t, "build", w.cfgDir)
	t.Log(strings.TrimSpace(w.sbx(t, "agent", "install", "claude", w.cfgDir, "ws")))

	bash := func(cmd string) scriptedCall {
		return scriptedCall{Name: "Bash", Input: map[string]any{"command": cmd, "description": "scripted"}}
	}
	const (
		iWrite = 4
	)
	script := &bashScript{Tools: []scriptedCall{
		0:      bash("uname -n; id -un"),
		1:      bash("export SBX_X=persisted-42; cd /tmp; sleep 300 & echo started"),
		2:      bash(`echo "x=$SBX_X"; pwd; ps | while read -r l; do case "$l" in *"sleep 300"*) echo found-sleep;; esac; done`),
		3:      bash("echo shell-state-done"),
		iWrite: {Name: "Write", Input: map[string]any{"file_path": note, "content": "one\n"}},
		// As a model does after Claude Code refuses an Edit of a path the
		// host has not: the path Write's result names.
		5: {Name: "Edit", Make: func(f *bashScript) map[string]any {
			r, _ := f.result(iWrite)
			p := note
			if m := createdAt.FindStringSubmatch(r.Text); m != nil {
				p = m[1]
			}
			return map[string]any{"file_path": p, "old_string": "one", "new_string": "two"}
		}},
		6:  {Name: "Read", Input: map[string]any{"file_path": note}},
		7:  bash("cat " + note),
		8:  {Name: "Read", Input: map[string]any{"file_path": hello}},
		9:  {Name: "Edit", Input: map[string]any{"file_path": hello, "old_string": "hello host", "new_string": "hello edited"}},
		10: bash("cat /workspace/hello.txt"),
		11: {Name: "Read", Input: map[string]any{"file_path": secret}},
		12: {Name: "Read", Input: map[string]any{"file_path": filepath.Join(work, "sub", "..", "secret.txt")}},
	}}
	srv := httptest.NewServer(script)
	defer srv.Close()
	out, err := w.claude(ctx, exe, srv.URL).CombinedOutput()
	if err != nil {
		t.Fatalf("claude -p: %v\n%s", err, out)
	}
	want := []struct {
		i       int
		text    string
		isError bool
	}{
		{0, "ws\n" + machinetest.User, false},
		{1, "started", false},
		{2, "x=persisted-42\n/tmp\nfound-sleep", false},
		{iWrite, "created successfully", false},
		{5, "", false},
		{6, "two", false},
		{7, "two", false},
		{8, "hello host", false},
		{9, "", false},
		{10, "hello edited", false},
		{11, `hide = "secret.txt"`, true},
		{12, `hide = "secret.txt"`, true},
	}
	for _, c := range want {
		got, ok := script.result(c.i)
		if !ok {
			t.Errorf("call %d (%s): no tool_result reached the fake", c.i, script.Tools[c.i].Name)
			continue
		}
		t.Logf("call %d (%s): %q", c.i, script.Tools[c.i].Name, got.Text)
		if !strings.Contains(got.Text, c.text) || got.IsError != c.isError {
			t.Errorf("call %d (%s): tool_result %q (error %v), want it to hold %q (error %v)", c.i, script.Tools[c.i].Name, got.Text, got.IsError, c.text, c.isError)
		}
	}
	if script.told("top secret value") {
		t.Errorf("the hidden file's content reached the model")
	}
	if _, err := os.Lstat(note); err == nil {
		t.Errorf("%s exists on the host: a guest-only file was written there", note)
	}
	if b, _ := os.ReadFile(hello); string(b) != "hello edited\n" {
		t.Errorf("the mounted file on the host holds %q after the Edit", b)
	}
	if script.told(ranOnHost) {
		t.Errorf("the PostToolUse check reported a call that ran on the host")
	}
	for _, e := range supervisor.List(ctx, w.runtime) {
		t.Errorf("after the session ended, its sandbox is still there: %+v", e)
	}
}
