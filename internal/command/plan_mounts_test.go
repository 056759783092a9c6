package command

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanShowsMountedHostFiles runs sbx plan on a checkout whose mount
// holds an .env (hidden), an .env.local and a .git/config with a token
// (not hidden): the text and JSON plans list the hidden one and warn
// about the others, the saved plan keeps the report for sbx show, and no
// file's content is printed.
func TestPlanShowsMountedHostFiles(t *testing.T) {
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{})
	writeFile(t, filepath.Join(dir, "mounts.hcl"), `
vfs "workspace" {
  mount "/workspace" {
    host   = "."
    access = "rw"
    hide   = [".env"]
  }
}

sandbox "work" {
  image  = image.box
  vfs    = [vfs.workspace]
  memory = "512MiB"
}
`)
	writeFile(t, filepath.Join(dir, ".env"), "API_KEY=hidden-value\n")
	writeFile(t, filepath.Join(dir, ".env.local"), "API_KEY=visible-value\n")
	writeFile(t, filepath.Join(dir, ".git", "config"), "[remote \"origin\"]\n\turl = https://me:ghp_PLANMUSTNOTSHOW@example.test/r.git\n")
	f.mustRun(ExitOK, "lock", dir)

	text := f.mustRun(ExitOK, "plan", "-no-color", dir)
	for _, want := range []string{
		`/workspace <- "." (vfs.workspace, mounts.hcl:3), in sandbox.work`,
		"hide \".env\" hides:\n      .env\n",
		".env.local   an environment file",
		".git/config  a git configuration with credentials in a URL",
		"Warning: 2 files that look like secrets are visible in the guest.",
	} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("plan does not show %q:\n%s", want, text.stdout)
		}
	}

	js := f.mustRun(ExitOK, "plan", "-json", dir)
	var doc struct {
		Mounts []struct {
			Guest   string `json:"guest"`
			Secrets []struct {
				Path string `json:"path"`
			} `json:"secrets"`
		} `json:"mounts"`
	}
	if err := json.Unmarshal([]byte(js.stdout), &doc); err != nil {
		t.Fatalf("plan -json: %v\n%s", err, js.stdout)
	}
	if len(doc.Mounts) != 1 || len(doc.Mounts[0].Secrets) != 2 {
		t.Errorf("plan -json mounts: %+v", doc.Mounts)
	}

	out := filepath.Join(t.TempDir(), "plan.json")
	f.mustRun(ExitOK, "plan", "-out", out, dir)
	shown := f.mustRun(ExitOK, "show", "-no-color", out)
	if !strings.Contains(shown.stdout, ".env.local   an environment file") {
		t.Errorf("show of the saved plan lacks the mount report:\n%s", shown.stdout)
	}

	for _, r := range []result{text, js, shown} {
		for _, secret := range []string{"hidden-value", "visible-value", "ghp_PLANMUSTNOTSHOW"} {
			if strings.Contains(r.stdout+r.stderr, secret) {
				t.Errorf("a file's content reached the output: %q", secret)
			}
		}
	}
}
