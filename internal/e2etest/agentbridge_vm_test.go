//go:build linux

package e2etest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// ranOnHost is what the PostToolUse check tells the model of a Bash call
// that ran with a command the PreToolUse hook did not write.
const ranOnHost = "this Bash call ran on the host, not in the sandbox"

// bashScript is a fake Messages API that answers each turn with the
// next of Calls as a Bash tool call, then with text, and records the
// tool_result of each call by its index. Streams as the real API does.
type bashScript struct {
	Calls []string
	// Tools, when set, replaces Calls: each call's tool and input.
	Tools []scriptedCall
	// Hold, when set, is called before the answer to turn Hold's index
	// (1-based: after that many results) and the answer waits for it.
	HoldAt int
	Hold   func()

	mu      sync.Mutex
	bodies  []string // every request body
	results map[int]bashResult
	other   []string // requests that were not POST /v1/messages
}

// scriptedCall is one tool call of a script: the tool's name and input.
type scriptedCall struct {
	Name  string
	Input map[string]any
	// Make, when set, makes the input when the call is sent, from the
	// results so far.
	Make func(f *bashScript) map[string]any
}

type bashResult struct {
	Text    string
	IsError bool
}

func (f *bashScript) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		f.mu.Lock()
		f.other = append(f.other, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		apiError(w, http.StatusNotFound, "not_found_error", "fake: only POST /v1/messages")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	var req messagesRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "fake: "+err.Error())
		return
	}
	n := 0
	f.mu.Lock()
	f.bodies = append(f.bodies, string(body))
	if f.results == nil {
		f.results = map[int]bashResult{}
	}
	for _, m := range req.Messages {
		var blocks []contentBlock
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			var i int
			if b.Type != "tool_result" {
				continue
			}
			if _, err := fmt.Sscanf(b.ToolUseID, "toolu_sbx_bash_%d", &i); err != nil {
				continue
			}
			n++
			f.results[i] = bashResult{Text: toolResultText(b.Content), IsError: b.IsError}
		}
	}
	f.mu.Unlock()
	if f.Hold != nil && n == f.HoldAt {
		f.Hold()
	}
	var blocks []map[string]any
	stop := "end_turn"
	calls := f.Tools
	if calls == nil {
		for _, c := range f.Calls {
			calls = append(calls, scriptedCall{Name: "Bash", Input: map[string]any{"command": c, "description": "scripted"}})
		}
	}
	if n < len(calls) {
		stop = "tool_use"
		input := calls[n].Input
		if calls[n].Make != nil {
			input = calls[n].Make(f)
		}
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_sbx_bash_%d", n), "name": calls[n].Name,
			"input": input})
	} else {
		blocks = append(blocks, map[string]any{"type": "text", "text": "done"})
	}
	streamMessage(w, req.Model, blocks, stop)
}

// toolResultText is a tool_result's content as text: a string, or the
// text blocks of a list joined.
func toolResultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type, Text string
	}
	json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// told reports whether any request carried text.
func (f *bashScript) told(text string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.bodies {
		if strings.Contains(b, text) {
			return true
		}
	}
	return false
}

func (f *bashScript) result(i int) (bashResult, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.results[i]
	return r, ok
}

// bridgeWorld is a configuration directory of the fixture's sandbox, an
// sbx binary, a short runtime directory and the environment Claude Code
// runs in on the host.
type bridgeWorld struct {
	cfgDir, sbxBin, runtime, home string
	environ                       []string
}

func newBridgeWorld(t *testing.T) *bridgeWorld {
	t.Helper()
	return newBridgeWorldFrom(t, filepath.Join(dir, "sbx.hcl"))
}

// newBridgeWorldFrom is newBridgeWorld with the spec at specPath.
func newBridgeWorldFrom(t *testing.T, specPath string) *bridgeWorld {
	t.Helper()
	w := &bridgeWorld{cfgDir: vmConfigDir(t, specPath, "kernel.deb", "busybox.deb"), home: t.TempDir()}
	var err error
	if w.runtime, err = os.MkdirTemp("", "sbxrt-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(w.runtime) })
	// Whatever sandbox a failed run leaves goes before its directory.
	t.Cleanup(func() {
		for _, e := range supervisor.List(context.Background(), w.runtime) {
			if err := supervisor.Remove(context.Background(), e.Dir, 0, 0); err != nil {
				t.Errorf("removing %s: %v", e.Dir, err)
			}
		}
	})
	os.Chmod(w.runtime, 0o700)
	w.sbxBin = filepath.Join(t.TempDir(), "sbx")
	build := exec.Command("go", "build", "-o", w.sbxBin, "../../cmd/sbx")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building sbx: %v\n%s", err, out)
	}
	w.environ = withEnv(environ, "SBX_RUNTIME_DIR="+w.runtime)
	return w
}

// sbx runs the built sbx with the world's environment.
func (w *bridgeWorld) sbx(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(w.sbxBin, args...)
	cmd.Env = w.environ
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbx %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// claude starts claude -p in the configuration directory against the
// fake at url, with a home of its own.
func (w *bridgeWorld) claude(ctx context.Context, exe, url string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, exe, "-p", "run the scripted commands", "--output-format", "text")
	cmd.Dir = w.cfgDir
	cmd.Env = withEnv(w.environ, "HOME="+w.home, "ANTHROPIC_BASE_URL="+url, "ANTHROPIC_API_KEY=sk-ant-sbx-test",
		"DISABLE_AUTOUPDATER=1", "BASH_DEFAULT_TIMEOUT_MS=600000", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	return cmd
}

// sessionSandboxes returns the supervisor directories of the world's
// runtime directory that hold a session sandbox's lease, and which of
// them run.
func (w *bridgeWorld) sessionSandboxes(ctx context.Context) (all, running []supervisor.Entry) {
	for _, e := range supervisor.List(ctx, w.runtime) {
		if !strings.HasPrefix(e.Name, machinetest.Sandbox+"-claude-") {
			continue
		}
		all = append(all, e)
		if e.Liveness.Running {
			running = append(running, e)
		}
	}
	return all, running
}

// TestClaudeCodeBashInSandbox runs the real Claude Code on the host with
// the hooks "sbx agent install claude" writes, against a fake Messages
// API that calls Bash: every call must have run in the session's sandbox
// (the guest's hostname and user, files only the guest has), none on the
// host, and the sandbox must be gone when the session ends. Then a second
// session is killed with SIGKILL in the middle of its calls: its sandbox
// must be reaped within the lease's bound.
func TestClaudeCodeBashInSandbox(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	exe := claudeExecutable(ctx, t)
	w := newBridgeWorld(t)
	if h, _ := os.Hostname(); h == machinetest.Sandbox {
		t.Fatalf("the host is named %q, as the guest is: the test could not tell them apart", h)
	}
	if _, err := os.Stat("/etc/motd"); err == nil {
		if b, _ := os.ReadFile("/etc/motd"); string(b) == "sbx test sandbox\n" {
			t.Fatal("the host's /etc/motd is the guest's: the test could not tell them apart")
		}
	}
	// Built beforehand, so that the first Bash call only boots.
	w.sbx(t, "build", w.cfgDir)
	out := w.sbx(t, "agent", "install", "claude", w.cfgDir, machinetest.Sandbox)
	t.Log(strings.TrimSpace(out))

	script := &bashScript{Calls: []string{
		"uname -n; id -un",
		"cat /etc/motd",
		`printf '%s\n' "it's $(id -u)"; exit 3`,
	}}
	srv := httptest.NewServer(script)
	defer srv.Close()
	cmd := w.claude(ctx, exe, srv.URL)
	outb, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("claude -p: %v\n%s", err, outb)
	}
	want := []struct {
		text    string
		isError bool
	}{
		{machinetest.Sandbox + "\n" + machinetest.User, false},
		{"sbx test sandbox", false},
		{fmt.Sprintf("it's %d", machinetest.UID), true},
	}
	for i, c := range want {
		got, ok := script.result(i)
		if !ok {
			t.Errorf("call %d (%q): no tool_result reached the fake", i, script.Calls[i])
			continue
		}
		if !strings.Contains(got.Text, c.text) || got.IsError != c.isError {
			t.Errorf("call %d (%q): tool_result %q (error %v), want it to hold %q (error %v)", i, script.Calls[i], got.Text, got.IsError, c.text, c.isError)
		}
		if strings.Contains(got.Text, "\nroot") || strings.HasPrefix(got.Text, "root") {
			t.Errorf("call %d ran as root: %q", i, got.Text)
		}
	}
	if got, _ := script.result(2); !strings.Contains(got.Text, "3") {
		t.Errorf("call 2: the exit code is not reported: %q", got.Text)
	}
	if script.told(ranOnHost) {
		t.Errorf("the PostToolUse check reported a call that ran on the host")
	}
	// SessionEnd stopped and removed the session's sandbox.
	if all, _ := w.sessionSandboxes(ctx); len(all) != 0 {
		t.Errorf("after the session ended, its sandbox is still there: %+v", all)
	}

	// A session whose Claude is killed: the fake holds its answer to the
	// first result until Claude is dead.
	killed := make(chan struct{})
	var claudeProc *os.Process
	script2 := &bashScript{Calls: []string{"id -un", "id -un"}, HoldAt: 1}
	var runningBefore int
	var psOut string
	script2.Hold = func() {
		_, running := w.sessionSandboxes(ctx)
		runningBefore = len(running)
		// Not w.sbx: this runs on the fake's goroutine, where t.Fatal
		// must not be called.
		ps := exec.Command(w.sbxBin, "ps", "-a")
		ps.Env = w.environ
		b, _ := ps.CombinedOutput()
		psOut = string(b)
		claudeProc.Signal(syscall.SIGKILL)
		<-killed
	}
	srv2 := httptest.NewServer(script2)
	defer srv2.Close()
	cmd2 := w.claude(ctx, exe, srv2.URL)
	if err := cmd2.Start(); err != nil {
		t.Fatal(err)
	}
	claudeProc = cmd2.Process
	cmd2.Wait()
	close(killed)
	dead := time.Now()
	if got, _ := script2.result(0); !strings.Contains(got.Text, machinetest.User) {
		t.Fatalf("the killed session's first call: %q", got.Text)
	}
	if runningBefore != 1 {
		t.Fatalf("before Claude was killed, %d session sandboxes ran; want 1", runningBefore)
	}
	if !strings.Contains(psOut, "(claude session ") || !strings.Contains(psOut, machinetest.Sandbox+"-claude-") {
		t.Errorf("sbx ps -a does not show the session sandbox with its Claude session:\n%s", psOut)
	}
	t.Logf("sbx ps -a while the session ran:\n%s", psOut)
	bound := supervisor.LeasePoll + 30*time.Second
	for {
		_, running := w.sessionSandboxes(ctx)
		if len(running) == 0 {
			t.Logf("the killed session's sandbox stopped %v after Claude died", time.Since(dead).Round(100*time.Millisecond))
			break
		}
		if time.Since(dead) > bound {
			t.Fatalf("the killed session's sandbox still runs %v after Claude died", bound)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestClaudeCodeBashCheckedAfter runs Claude Code with the hooks of
// "sbx agent install claude" less the PreToolUse one (an installation
// broken outside sbx): the call runs on the host, and the PostToolUse
// check must tell the model so. No sandbox is started.
func TestClaudeCodeBashCheckedAfter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	exe := claudeExecutable(ctx, t)
	w := newBridgeWorld(t)
	w.sbx(t, "agent", "install", "claude", w.cfgDir, machinetest.Sandbox)
	path := filepath.Join(w.cfgDir, ".claude", "settings.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var settings map[string]map[string]json.RawMessage
	if err := json.Unmarshal(b, &settings); err != nil {
		t.Fatal(err)
	}
	delete(settings["hooks"], "PreToolUse")
	b, _ = json.Marshal(settings)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	script := &bashScript{Calls: []string{"uname -n"}}
	srv := httptest.NewServer(script)
	defer srv.Close()
	if out, err := w.claude(ctx, exe, srv.URL).CombinedOutput(); err != nil {
		t.Fatalf("claude -p: %v\n%s", err, out)
	}
	host, _ := os.Hostname()
	if got, _ := script.result(0); !strings.Contains(got.Text, host) {
		t.Fatalf("without the PreToolUse hook the call should have run on the host (%s): %q", host, got.Text)
	}
	if !script.told(ranOnHost) {
		t.Errorf("no request after the call told the model it ran on the host")
	}
}

// TestClaudeCodeHostToolsRefused runs Claude Code with the hooks of "sbx
// agent install claude" against a fake that calls Monitor, a tool that
// runs its command on the host (measured with 2.1.332, through
// ToolSearch), and WebFetch: the hooks must refuse both, so the text of
// the host file Monitor's command reads never reaches the model. No
// sandbox is started.
func TestClaudeCodeHostToolsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	exe := claudeExecutable(ctx, t)
	w := newBridgeWorld(t)
	w.sbx(t, "agent", "install", "claude", w.cfgDir, machinetest.Sandbox)
	// A read-only command runs without asking (measured): it reads a
	// file only the host has, whose text must never reach the model.
	hostOnly := fmt.Sprintf("host-only-%d", time.Now().UnixNano())
	if err := os.WriteFile(filepath.Join(w.cfgDir, "host-only.txt"), []byte(hostOnly+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := &bashScript{Tools: []scriptedCall{
		{Name: "ToolSearch", Input: map[string]any{"query": "select:Monitor", "max_results": 5}},
		{Name: "Monitor", Input: map[string]any{"command": "cat host-only.txt", "description": "scripted", "timeout_ms": 5000}},
		{Name: "WebFetch", Input: map[string]any{"url": "http://127.0.0.1:1/", "prompt": "x"}},
	}}
	srv := httptest.NewServer(script)
	defer srv.Close()
	out, err := w.claude(ctx, exe, srv.URL).CombinedOutput()
	if err != nil {
		t.Fatalf("claude -p: %v\n%s", err, out)
	}
	if script.told(hostOnly) {
		t.Errorf("Monitor's command ran on the host: the model was sent the host's file")
	}
	for i, tool := range []string{"Monitor", "WebFetch"} {
		got, ok := script.result(i + 1)
		if !ok || !got.IsError || !strings.Contains(got.Text, tool+" is not available") {
			t.Errorf("the %s call's result is %+v (seen %v), want the hook's refusal", tool, got, ok)
		}
	}
	if all, _ := w.sessionSandboxes(ctx); len(all) != 0 {
		t.Errorf("a sandbox was started: %v", all)
	}
}
