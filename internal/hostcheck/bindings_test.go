package hostcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

// TestBindingsCheck: doctor's "bindings" check says which source each
// secret of the configuration would be read from, warns with the block
// to add for a secret no source covers (a spec's command never counts),
// fails on a bindings file sbx refuses to read, and never runs a
// command it names.
func TestBindingsCheck(t *testing.T) {
	env := baseEnv(t, os.Getenv("PATH"))
	home := strings.TrimPrefix(env[1], "HOME=")
	cfgDir := t.TempDir()
	marker := filepath.Join(t.TempDir(), "ran")
	secret := func(name, source string) policy.SecretBinding {
		return policy.SecretBinding{Name: name, Env: strings.ToUpper(name), Source: source,
			Origin: policy.Origin{Block: "secret." + name, File: "main.hcl", Line: 3}}
	}
	cfg := &lang.Config{Dir: cfgDir, Sandboxes: map[string]*lang.Sandbox{
		"dev": {Name: "dev", Policy: policy.Sandbox{Secrets: []policy.SecretBinding{
			secret("api", "env:API_KEY"),
			secret("gh", "command:touch "+marker),
		}}},
	}}

	// No bindings file: the spec's env: source counts, its command does
	// not; the fix is the block to paste.
	r := checkBindings(&Options{Environ: env, Config: cfg})
	if r.Status != Warn || !strings.Contains(r.Detail, "no bindings file at ~/.config/sbx/bindings.hcl") ||
		!strings.Contains(r.Detail, "secret.api from the spec (env)") ||
		!strings.Contains(r.Detail, "secret.gh (sandbox.dev) names a command, which runs only from a binding") ||
		!strings.Contains(r.Fix, `binding "gh" {`) || !strings.Contains(r.Fix, `source = "command:touch `) {
		t.Errorf("a spec's command with no binding:\n%+v", r)
	}

	// A binding of the user's covers it.
	path := filepath.Join(home, ".config", "sbx", "bindings.hcl")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	src := "binding \"gh\" {\n  source = \"command:touch " + marker + "\"\n  config = \"" + cfgDir + "\"\n}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	r = checkBindings(&Options{Environ: env, Config: cfg})
	if r.Status != OK || !strings.Contains(r.Detail, "~/.config/sbx/bindings.hcl: 1 binding") ||
		!strings.Contains(r.Detail, "secret.gh from the bindings file (command)") || r.Fix != "" {
		t.Errorf("a bound command:\n%+v", r)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("the check ran the bound command (%v)", err)
	}

	// Without a configuration, the file alone.
	if r := checkBindings(&Options{Environ: env}); r.Status != OK || r.Detail != "~/.config/sbx/bindings.hcl: 1 binding" {
		t.Errorf("the file alone:\n%+v", r)
	}

	// A file others may write is refused, with the command that fixes it.
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	r = checkBindings(&Options{Environ: env, Config: cfg})
	if r.Status != Fail || !strings.Contains(r.Detail, "may be written by other users (mode 0666)") || !strings.Contains(r.Fix, "chmod") {
		t.Errorf("a file others may write:\n%+v", r)
	}

	// A file that does not parse names its line.
	if err := os.WriteFile(path, []byte("binding \"gh\" {\n  sorce = \"env:X\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	r = checkBindings(&Options{Environ: env, Config: cfg})
	if r.Status != Fail || !strings.Contains(r.Detail, path+":2:") {
		t.Errorf("a file that does not parse:\n%+v", r)
	}

	// Run includes it.
	find(t, Run(t.Context(), Options{Environ: env, OSRelease: debianRelease(t)}), "bindings")
}
