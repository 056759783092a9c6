package agentbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sbx-dev/sbx/policy"
)

// fileWorld is a mount's host directory with a hidden file, a
// read-only directory and a tmpfs directory, and a shadow directory.
func fileWorld(t *testing.T) (root, shadow string, mounts []Mount) {
	t.Helper()
	root = t.TempDir()
	shadow = filepath.Join(t.TempDir(), "shadow")
	for _, d := range []string{"sub", "ro", "scratch", ".git"} {
		os.Mkdir(filepath.Join(root, d), 0o755)
	}
	for _, f := range []string{"plain.txt", ".env", "ro/x", "sub/y"} {
		os.WriteFile(filepath.Join(root, f), []byte("data\n"), 0o644)
	}
	mounts = []Mount{{HostDir: root, Policy: policy.Mount{Guest: "/workspace", Access: policy.ReadWrite,
		Hide: []string{".env", "keys/"}, ReadOnly: []string{"ro"}, Tmpfs: []string{"scratch"}}}}
	return root, shadow, mounts
}

func TestRouteFileRefuses(t *testing.T) {
	root, shadow, mounts := fileWorld(t)
	os.Symlink(filepath.Join(root, ".env"), filepath.Join(root, "link-to-env"))
	os.Symlink("/etc", filepath.Join(root, "link-out"))
	os.Symlink(filepath.Join(root, "sub"), filepath.Join(root, "dirlink"))
	for _, c := range []struct {
		tool, path, want string
	}{
		{"Read", root + "/.env", `hide = ".env"`},
		{"Read", root + "/sub/../.env", `hide = ".env"`},
		{"Read", root + "/./.env/", `hide = ".env"`},
		{"Read", root + "//.env", `hide = ".env"`},
		{"Read", "../" + filepath.Base(root) + "/.env", `hide = ".env"`},
		{"Read", root + "/.ENV", `hide = ".env"`},
		{"Read", root + "/Keys/id", `hide = "keys/"`},
		{"Read", root + "/keys/id", `hide = "keys/"`},
		{"Write", root + "/.env", `hide = ".env"`},
		{"Read", root + "/link-to-env", "symbolic link"},
		{"Read", root + "/link-out/passwd", "symbolic link"},
		{"Edit", root + "/dirlink/y", "symbolic link"},
		{"Edit", root + "/ro/x", `readonly = "ro"`},
		{"MultiEdit", root + "/RO/x", `readonly = "ro"`},
		{"Write", root + "/ro/new", `readonly = "ro"`},
		{"Write", root + "/.git/config", ".git directory"},
		{"Edit", root + "/sub/.GIT/hooks/pre-commit", ".git directory"},
		{"Read", "~/.ssh/id_rsa", "not a path"},
		{"Read", "", "not a path"},
		{"Read", root + "/a\x00b", "not a path"},
		{"NotebookEdit", root + "/plain.txt", "not a file tool"},
	} {
		_, err := RouteFile(c.tool, c.path, filepath.Join(root, "sub"), mounts, shadow)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: %v, want an error holding %q", c.tool, c.path, err, c.want)
		}
	}
	ro := []Mount{{HostDir: root, Policy: policy.Mount{Guest: "/w", Access: policy.ReadOnly}}}
	if _, err := RouteFile("Edit", root+"/plain.txt", "/", ro, shadow); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("Edit in a read-only mount: %v", err)
	}
}

func TestRouteFilePlaces(t *testing.T) {
	root, shadow, mounts := fileWorld(t)
	for _, c := range []struct {
		tool, path string
		want       FileRoute
	}{
		{"Read", root + "/plain.txt", FileRoute{OnHost, root + "/plain.txt", ""}},
		{"Edit", "plain.txt", FileRoute{OnHost, root + "/plain.txt", ""}},
		{"Write", root + "/sub/new.txt", FileRoute{OnHost, root + "/sub/new.txt", ""}},
		{"Read", root + "/ro/x", FileRoute{OnHost, root + "/ro/x", ""}},
		{"Write", root + "/scratch/a", FileRoute{InGuest, shadow + "/workspace/scratch/a", "/workspace/scratch/a"}},
		{"Write", "/tmp/note", FileRoute{InGuest, shadow + "/tmp/note", "/tmp/note"}},
		{"Edit", "/tmp/../etc/hosts", FileRoute{InGuest, shadow + "/etc/hosts", "/etc/hosts"}},
		{"Edit", shadow + "/tmp/note", FileRoute{InGuest, shadow + "/tmp/note", "/tmp/note"}},
		{"Read", shadow + "/../shadow/tmp/note", FileRoute{InGuest, shadow + "/tmp/note", "/tmp/note"}},
	} {
		got, err := RouteFile(c.tool, c.path, root, mounts, shadow)
		if err != nil || got != c.want {
			t.Errorf("%s %q: %+v %v, want %+v", c.tool, c.path, got, err, c.want)
		}
	}
}

// fakeGuest stands in for the sandbox's file commands (the real ones
// run in the VM test): a map of guest files.
type fakeGuest struct {
	files  map[string][]byte
	pushed map[string][]byte
}

func (g *fakeGuest) Fetch(_ context.Context, p string, limit int) ([]byte, bool, error) {
	b, ok := g.files[p]
	if len(b) > limit {
		return nil, false, errors.New("too large")
	}
	return b, ok, nil
}

func (g *fakeGuest) Push(_ context.Context, p string, data []byte) error {
	g.pushed[p] = bytes.Clone(data)
	return nil
}

func fileInput(t *testing.T, event, tool string, input map[string]any) Input {
	b, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	return Input{SessionID: "s1", Cwd: "/", HookEventName: event, ToolName: tool, ToolInput: b}
}

func updatedPath(t *testing.T, d Decision) string {
	t.Helper()
	var out struct {
		HookSpecificOutput struct {
			PermissionDecision string
			UpdatedInput       map[string]any
		}
	}
	if d.Code != 0 || json.Unmarshal(d.Stdout, &out) != nil || out.HookSpecificOutput.PermissionDecision != "allow" {
		t.Fatalf("decision %+v (%s), want allow", d, d.Stdout)
	}
	p, _ := out.HookSpecificOutput.UpdatedInput["file_path"].(string)
	return p
}

func TestDecideFileGuestRoundTrip(t *testing.T) {
	_, shadow, mounts := fileWorld(t)
	g := &fakeGuest{files: map[string][]byte{"/tmp/note": []byte("one\n")}, pushed: map[string][]byte{}}
	d := DecideFile(context.Background(), fileInput(t, "PreToolUse", "Edit", map[string]any{"file_path": "/tmp/note", "old_string": "one", "new_string": "two"}), mounts, shadow, g)
	s := updatedPath(t, d)
	if s != shadow+"/tmp/note" {
		t.Fatalf("file_path %q", s)
	}
	if b, _ := os.ReadFile(s); string(b) != "one\n" {
		t.Fatalf("shadow holds %q", b)
	}
	os.WriteFile(s, []byte("two\n"), 0o600)
	d = DecideFile(context.Background(), fileInput(t, "PostToolUse", "Edit", map[string]any{"file_path": s}), mounts, shadow, g)
	if d.Code != 0 || string(g.pushed["/tmp/note"]) != "two\n" {
		t.Fatalf("post: %+v, pushed %q", d, g.pushed)
	}
	// A guest file gone since: the stale copy goes too.
	delete(g.files, "/tmp/note")
	DecideFile(context.Background(), fileInput(t, "PreToolUse", "Read", map[string]any{"file_path": "/tmp/note"}), mounts, shadow, g)
	if _, err := os.Lstat(s); err == nil {
		t.Fatalf("the stale shadow copy is still there")
	}
}

// TestShadowNeverFollows plays a shadow tree where something put a
// symbolic link or a FIFO in a copy's place, and a copy too large.
func TestShadowNeverFollows(t *testing.T) {
	shadow := filepath.Join(t.TempDir(), "shadow")
	outside := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(outside, []byte("host file\n"), 0o644)
	os.MkdirAll(shadow+"/tmp", 0o700)
	os.Symlink(outside, shadow+"/tmp/note")
	if err := WriteShadow(shadow, "/tmp/note", []byte("guest bytes\n"), true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "host file\n" {
		t.Fatalf("WriteShadow wrote through a symbolic link: %q", b)
	}
	os.Remove(shadow + "/tmp/note")
	os.Symlink(outside, shadow+"/tmp/note")
	if _, err := ReadShadow(shadow, "/tmp/note"); err == nil {
		t.Fatal("ReadShadow followed a symbolic link")
	}
	os.Remove(shadow + "/tmp/note")
	if err := syscall.Mkfifo(shadow+"/tmp/fifo", 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadShadow(shadow, "/tmp/fifo"); err == nil {
		t.Fatal("ReadShadow read a FIFO")
	}
	// A directory link above the copy leads outside the shadow.
	os.Symlink(filepath.Dir(outside), shadow+"/up")
	if err := WriteShadow(shadow, "/up/victim", []byte("x"), true); err == nil {
		t.Fatal("WriteShadow wrote through a directory link")
	}
	if b, _ := os.ReadFile(outside); string(b) != "host file\n" {
		t.Fatalf("the host file changed: %q", b)
	}
	big := make([]byte, MaxShadowFile+1)
	os.WriteFile(shadow+"/tmp/big", big, 0o600)
	if _, err := ReadShadow(shadow, "/tmp/big"); err == nil {
		t.Fatal("ReadShadow took a copy larger than the bound")
	}
	os.Chmod(shadow, 0o755)
	if _, err := ReadShadow(shadow, "/tmp/big"); err == nil {
		t.Fatal("ReadShadow used a shadow directory others may enter")
	}
}

func TestDecideFileBlocks(t *testing.T) {
	root, shadow, mounts := fileWorld(t)
	g := &fakeGuest{files: map[string][]byte{"/tmp/huge": make([]byte, MaxShadowFile+1)}, pushed: map[string][]byte{}}
	for _, in := range []Input{
		fileInput(t, "PreToolUse", "Read", map[string]any{"file_path": root + "/.env"}),
		fileInput(t, "PreToolUse", "Read", map[string]any{"file_path": "/tmp/huge"}),
		fileInput(t, "PreToolUse", "Read", map[string]any{"path": "/tmp/x"}),
		fileInput(t, "PostToolUse", "Write", map[string]any{"file_path": shadow + "/tmp/never-written"}),
	} {
		if d := DecideFile(context.Background(), in, mounts, shadow, g); d.Code != 2 {
			t.Errorf("%s %s: %+v, want a block", in.HookEventName, in.ToolInput, d)
		}
	}
	if len(g.pushed) != 0 {
		t.Errorf("pushed %v", g.pushed)
	}
}
