package plan_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/lang"
)

// checkout writes a configuration directory whose sandbox mounts host
// with the given hide and tmpfs rules, and the files named (a value
// ending in "/" makes a directory), and loads it.
func checkout(t *testing.T, dir, host, rules string, files map[string]string) *lang.Config {
	t.Helper()
	spec := fmt.Sprintf(`image "agent" {
  base = "alpine:3.23"
}

vfs "workspace" {
  mount "/workspace" {
    host   = %q
    access = "rw"
    %s
  }
}

sandbox "eval" {
  image = image.agent
  vfs   = [vfs.workspace]
}
`, host, rules)
	files["main.hcl"] = spec
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return cfg
}

// inspect runs InspectMounts with a watchdog, so that a walk that blocks
// (on a named pipe, say) fails the test instead of hanging it.
func inspect(t *testing.T, cfg *lang.Config, opts plan.InspectOptions) plan.MountReport {
	t.Helper()
	done := make(chan []plan.MountReport, 1)
	go func() { done <- plan.InspectMounts(context.Background(), cfg, opts) }()
	select {
	case rs := <-done:
		if len(rs) != 1 {
			t.Fatalf("InspectMounts = %+v; want one report", rs)
		}
		return rs[0]
	case <-time.After(20 * time.Second):
		t.Fatal("InspectMounts did not return within 20s")
	}
	return plan.MountReport{}
}

// rendered returns the text and JSON forms of a plan holding only r.
func rendered(t *testing.T, r plan.MountReport) (string, string) {
	t.Helper()
	p := &plan.Plan{Against: "state", Mounts: []plan.MountReport{r}}
	var text bytes.Buffer
	if err := plan.Render(&text, p, plan.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	js, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return text.String(), string(js)
}

func secretPaths(r plan.MountReport) []string {
	var out []string
	for _, s := range r.Secrets {
		out = append(out, s.Path)
	}
	return out
}

// TestInspectMountsBounds checks the three bounds: paths shown per rule
// (the rest counted), entries walked, and time.
func TestInspectMountsBounds(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{".env": "x"}
	for i := range 120 {
		files[fmt.Sprintf("node_modules/p%03d/index.js", i)] = ""
	}
	cfg := checkout(t, dir, ".", `hide = ["**/*.js", ".env"]`, files)

	full := inspect(t, cfg, plan.InspectOptions{MaxShown: 4})
	if full.Truncated != "" {
		t.Fatalf("an unbounded walk was truncated: %s", full.Truncated)
	}
	js := full.Hide[0]
	if js.Pattern != "**/*.js" || len(js.Paths) != 4 || js.More != 116 || js.Paths[0] != "node_modules/p000/index.js" {
		t.Errorf("hide **/*.js: %+v; want 4 paths and 116 more", js)
	}
	if text, _ := rendered(t, full); !strings.Contains(text, "and 116 more") {
		t.Errorf("the text does not count the rest:\n%s", text)
	}

	// 1 (main.hcl) + .env + node_modules + 120 packages: stop at 50.
	bounded := inspect(t, cfg, plan.InspectOptions{MaxEntries: 50})
	if bounded.Entries != 50 || !strings.Contains(bounded.Truncated, "50 entries") {
		t.Errorf("MaxEntries 50: entries %d, truncated %q", bounded.Entries, bounded.Truncated)
	}
	// Breadth first: the top level was seen before the bound hit.
	if got := bounded.Hide[1]; len(got.Paths) != 1 || got.Paths[0] != ".env" {
		t.Errorf("MaxEntries 50: hide .env = %+v", got)
	}
	if n := len(bounded.Hide[0].Paths) + bounded.Hide[0].More; n >= 120 {
		t.Errorf("MaxEntries 50 still listed %d js files", n)
	}
	text, _ := rendered(t, bounded)
	if !strings.Contains(text, "! the walk stopped after 50 entries, its limit; what lies beyond was not checked") ||
		!strings.Contains(text, "1 mount could not be checked in full") {
		t.Errorf("the text does not say the walk stopped:\n%s", text)
	}

	// The entries read before the bound hit are all reported.
	many := map[string]string{}
	for i := range 10 {
		many[fmt.Sprintf(".env.%d", i)] = ""
	}
	top := inspect(t, checkout(t, t.TempDir(), ".", `hide = []`, many), plan.InspectOptions{MaxEntries: 5})
	if top.Entries != 5 || len(top.Secrets) < 4 {
		t.Errorf("MaxEntries 5 over 11 files: entries %d, secrets %q; want 5 entries, each .env.N reported", top.Entries, secretPaths(top))
	}

	timed := inspect(t, cfg, plan.InspectOptions{Timeout: time.Nanosecond})
	if !strings.Contains(timed.Truncated, "time limit") || timed.Entries > 1 {
		t.Errorf("Timeout 1ns: entries %d, truncated %q", timed.Entries, timed.Truncated)
	}
}

// TestInspectMountsSymlinkOut plays a checkout that points a mount at
// the user's home through a symbolic link, and plants links inside the
// mount: the plan must not walk or read through any of them.
func TestInspectMountsSymlinkOut(t *testing.T) {
	outside := t.TempDir()
	for _, name := range []string{".env", "id_rsa", "outside-marker.pem"} {
		if err := os.WriteFile(filepath.Join(outside, name), []byte("-----BEGIN RSA PRIVATE KEY-----"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(outside, ".git"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, ".git", "config"), []byte("url = https://u:tok@example.test/r"), 0o600); err != nil {
		t.Fatal(err)
	}

	// The mount's host directory is a link out of the checkout.
	dir := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "work")); err != nil {
		t.Fatal(err)
	}
	cfg := checkout(t, dir, "work", `hide = ["*.pem"]`, map[string]string{})
	r := inspect(t, cfg, plan.InspectOptions{})
	if !strings.Contains(r.Problem, "leads outside the configuration directory") || r.Entries != 0 ||
		len(r.Secrets) != 0 || len(r.Hide[0].Paths) != 0 {
		t.Errorf("a host directory linked out of the checkout was inspected: %+v", r)
	}
	text, js := rendered(t, r)
	for _, s := range []string{text, js} {
		if strings.Contains(s, outside) || strings.Contains(s, "outside-marker") {
			t.Errorf("the plan names what the link leads to:\n%s", s)
		}
	}
	if !strings.Contains(text, "(vfs.workspace, main.hcl:6)") {
		t.Errorf("the problem does not name the spec line:\n%s", text)
	}

	// A link part-way: sub/work where sub is a link out.
	dir = t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	cfg = checkout(t, dir, "sub/.git", `hide = []`, map[string]string{})
	if r := inspect(t, cfg, plan.InspectOptions{}); !strings.Contains(r.Problem, "leads outside") || r.Entries != 0 {
		t.Errorf("a host path through a link out was inspected: %+v", r)
	}

	// Links inside the mount are entries, never followed: to a
	// directory outside, to one inside, and a .git that is a link.
	dir = t.TempDir()
	cfg = checkout(t, dir, ".", `hide = ["*.pem"]`, map[string]string{"real/": ""})
	for name, target := range map[string]string{"leak": outside, "loop": ".", "again": "real", ".git": filepath.Join(outside, ".git")} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	r = inspect(t, cfg, plan.InspectOptions{})
	if r.Problem != "" || r.Truncated != "" {
		t.Fatalf("inspecting a checkout with links: %+v", r)
	}
	if len(r.Secrets) != 0 || len(r.Hide[0].Paths) != 0 {
		t.Errorf("the walk followed a link: secrets %q, hidden %q", secretPaths(r), r.Hide[0].Paths)
	}
	// main.hcl, real, and the four links; nothing behind them.
	if r.Entries != 6 {
		t.Errorf("walked %d entries, want 6 (no link followed)", r.Entries)
	}
}

// TestInspectMountsExplicitOutside checks that a host directory the spec
// names outside the configuration directory is inspected when the caller
// asks for it (InspectOptions.Outside, as apply does): the spec asks for
// it by name, as host_paths does for images.
func TestInspectMountsExplicitOutside(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, ".env"), []byte("A=1"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := checkout(t, t.TempDir(), outside, `hide = []`, map[string]string{})
	r := inspect(t, cfg, plan.InspectOptions{Outside: true})
	if !r.Outside || r.Problem != "" || len(r.Secrets) != 1 || r.Secrets[0].Path != ".env" {
		t.Errorf("explicit outside directory: %+v", r)
	}
	if text, _ := rendered(t, r); !strings.Contains(text, "outside the configuration directory") {
		t.Errorf("the text does not say the directory is outside:\n%s", text)
	}
}

// TestInspectMountsOutsideNotRead plays a checkout that mounts a
// directory outside itself (as a pull request adding
// mount { host = "/root" hide = ["*"] } would) to have the plan print
// that directory's file names: without InspectOptions.Outside, as plan
// calls it, the directory is not read, the report says why, and neither
// the text nor the JSON form names a file in it — through an absolute
// path or one starting with "..".
func TestInspectMountsOutsideNotRead(t *testing.T) {
	parent := t.TempDir()
	outside := filepath.Join(parent, "home")
	const marker = "marker-file-name-of-the-reviewer"
	for _, name := range []string{marker, ".env", "id_ed25519"} {
		if err := os.MkdirAll(outside, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outside, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, host := range []string{outside, "../home"} {
		cfg := checkout(t, filepath.Join(parent, "checkout-"+strings.ReplaceAll(host, "/", "_")), host, `hide = ["*"]`, map[string]string{})
		r := inspect(t, cfg, plan.InspectOptions{})
		if !r.Outside || r.Problem != plan.OutsideNotInspected || r.Entries != 0 {
			t.Errorf("host %q: %+v", host, r)
		}
		text, js := rendered(t, r)
		for _, name := range []string{marker, ".env", "id_ed25519"} {
			if strings.Contains(text, name) || strings.Contains(js, name) {
				t.Errorf("host %q: the plan names %s, a file outside the checkout:\n%s\n%s", host, name, text, js)
			}
		}
		if !strings.Contains(text, "not inspected") {
			t.Errorf("host %q: the text does not say why the directory was not inspected:\n%s", host, text)
		}
	}
}

// TestInspectMountsMissingHost checks that a host directory that is
// missing, or not a directory, is a problem naming the spec line.
func TestInspectMountsMissingHost(t *testing.T) {
	for _, c := range []struct {
		host, file, want string
	}{
		{"work", "", `host directory "work" does not exist`},
		{"work", "work", `host "work" is not a directory`},
		{"gone", "", `host directory "gone" does not exist`},
	} {
		dir := t.TempDir()
		files := map[string]string{}
		if c.file != "" {
			files[c.file] = "x"
		}
		cfg := checkout(t, dir, c.host, `hide = [".env"]`, files)
		r := inspect(t, cfg, plan.InspectOptions{})
		if r.Problem != c.want {
			t.Errorf("host %q: problem %q, want %q", c.host, r.Problem, c.want)
		}
		text, _ := rendered(t, r)
		if !strings.Contains(text, "! "+c.want+" (vfs.workspace, main.hcl:6)") {
			t.Errorf("host %q: the text does not name the spec line:\n%s", c.host, text)
		}
	}
}

// TestInspectMountsPipes plants named pipes where the plan reads: the
// mount's host directory itself, a .git/config and an id_* file. None
// may block the plan.
func TestInspectMountsPipes(t *testing.T) {
	dir := t.TempDir()
	cfg := checkout(t, dir, ".", `hide = []`, map[string]string{".git/": "", "keys/": ""})
	for _, p := range []string{".git/config", "keys/id_deploy", "pipe"} {
		if err := syscall.Mkfifo(filepath.Join(dir, filepath.FromSlash(p)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := inspect(t, cfg, plan.InspectOptions{}); r.Problem != "" || len(r.Secrets) != 0 {
		t.Errorf("pipes: %+v", r)
	}

	dir = t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "work"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg = checkout(t, dir, "work", `hide = []`, map[string]string{})
	if r := inspect(t, cfg, plan.InspectOptions{}); r.Problem != `host "work" is not a directory` {
		t.Errorf("a pipe as the host directory: %+v", r)
	}
}

// TestInspectMountsQuotesNames plants file names that would draw plan
// lines or drive the terminal, and a credential in .git/config: names
// are escaped to one line, and no content is shown.
func TestInspectMountsQuotesNames(t *testing.T) {
	dir := t.TempDir()
	evil := ".env\n  + [narrows] all is well\x1b[2J"
	cfg := checkout(t, dir, ".", `hide = ["hidden*"]`, map[string]string{
		evil:                  "",
		"hidden\r\x1b]0;x\a":  "",
		".git/config":         "[remote \"o\"]\n\turl = https://me:ghp_SHOULDNOTAPPEAR@example.test/r.git\n",
		"keys/id_ci":          "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n",
		"keys/id_ci.pub":      "ssh-ed25519 AAAA",
		"tools/id_mapper.go":  "package tools",
		"sub/.git/config":     "[remote \"o\"]\n\turl = git@github.com:org/repo.git\n",
		"plain/.git/config":   "[remote \"o\"]\n\turl = https://github.com/org/repo.git\n",
		"ssh/.git/config":     "[remote \"o\"]\n\turl = ssh://git@github.com:22/org/repo.git\n",
		"token/.git/config":   "[remote \"o\"]\n\turl = https://ghp_abc@github.com/org/repo.git\n",
		"notakey/id_list.txt": "just ids",
	})
	r := inspect(t, cfg, plan.InspectOptions{})
	want := []string{`.env\n  + [narrows] all is well\x1b[2J`, ".git/config", "keys/id_ci", "token/.git/config"}
	if got := secretPaths(r); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("secrets %q, want %q", got, want)
	}
	if got := r.Hide[0].Paths; len(got) != 1 || got[0] != `hidden\r\x1b]0;x\x07` {
		t.Errorf("hidden %q", got)
	}
	text, js := rendered(t, r)
	for _, s := range []string{text, js} {
		if strings.ContainsAny(s, "\r\x1b\a") || strings.Contains(s, "SHOULDNOTAPPEAR") || strings.Contains(s, "b3BlbnNzaC1rZXkt") {
			t.Errorf("a control character or file content reached the plan:\n%q", s)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "+ [narrows]") {
			t.Errorf("a file name drew a plan line: %q", line)
		}
	}
}
