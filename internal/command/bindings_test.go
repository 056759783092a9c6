package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/hostenv"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/policy"
)

// bindingsPath is where the fixture's user keeps the bindings file:
// the default path under the fixture's HOME.
func (f *fixture) bindingsPath() string {
	return filepath.Join(hostenv.Get(f.environ, "HOME"), ".config", "sbx", "bindings.hcl")
}

// writeBindings writes the fixture user's bindings file, mode 0600.
func (f *fixture) writeBindings(content string) string {
	f.t.Helper()
	path := f.bindingsPath()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		f.t.Fatal(err)
	}
	return path
}

// commandSpec writes the fixture configuration with its secret's source
// replaced by a command that leaves marker behind, locks it, and
// returns its directory.
func (f *fixture) commandSpec(marker string) string {
	f.t.Helper()
	dir := f.writeConfig(f.t.TempDir(), specOptions{})
	spec := strings.Replace(f.spec(specOptions{}), `source = "env:API_TOKEN"`,
		`source = "command:touch `+marker+`; echo pwned"`, 1)
	writeFile(f.t, filepath.Join(dir, "main.hcl"), spec)
	f.mustRun(ExitOK, "lock", dir)
	return dir
}

func noFile(t *testing.T, path, what string) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		t.Errorf("%s ran: %s exists", what, path)
	}
}

// TestSpecCommandSourceNeverRuns plays a pull request that changes a
// secret's source to a command. validate warns; plan shows the secret
// without a source and runs nothing; run, eval and apply refuse before
// they build or start anything, saying what to add to the bindings file
// (its path, the spec's file:line), and the command never runs.
func TestSpecCommandSourceNeverRuns(t *testing.T) {
	f := newFixture(t)
	marker := filepath.Join(t.TempDir(), "ran")
	dir := f.commandSpec(marker)

	r := f.mustRun(ExitOK, "validate", dir)
	if !strings.Contains(r.stderr, "Command source is not run") || !strings.Contains(r.stderr, "main.hcl line 29") {
		t.Errorf("validate does not warn at the source:\n%s", r)
	}
	r = f.mustRun(ExitOK, "plan", dir)
	if !strings.Contains(r.stdout, "! secret.token:") || !strings.Contains(r.stdout, "never runs; bind secret.token in ~/.config/sbx/bindings.hcl") {
		t.Errorf("plan does not show the unbound secret:\n%s", r)
	}
	noFile(t, marker, "plan: the spec's command")

	guidance := []string{"secret.token (main.hcl:26)", "never from a spec", f.bindingsPath() + ":",
		`binding "token" {`, `source = "command:touch ` + marker + `; echo pwned"`, `config = "` + dir + `"`}
	for _, args := range [][]string{
		{"run", dir, "box", "--", "true"},
		{"eval", "-results", filepath.Join(t.TempDir(), "results"), dir, "box", "--", "true"},
		{"apply", "-auto-approve", dir},
	} {
		r := f.mustRun(ExitError, args...)
		for _, want := range guidance {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("sbx %s: the error lacks %q:\n%s", args[0], want, r)
			}
		}
		if strings.Contains(r.stderr, "Building") || strings.Contains(r.stdout, "Creating...") {
			t.Errorf("sbx %s went on to build or start:\n%s", args[0], r)
		}
		noFile(t, marker, "sbx "+args[0]+": the spec's command")
	}
	if _, err := os.Stat(filepath.Join(dir, ".sbx", "state.json")); err == nil {
		if b, _ := os.ReadFile(filepath.Join(dir, ".sbx", "state.json")); strings.Contains(string(b), `"sandbox.box"`) {
			t.Errorf("apply recorded the sandbox:\n%s", b)
		}
	}
}

// TestPlanShowsBindings: plan shows the source a binding gives each
// secret and where it is written, the most specific scope winning, a
// command as "command" only; it runs no command, and a binding that
// changes is no change of the plan.
func TestPlanShowsBindings(t *testing.T) {
	f := newFixture(t)
	specRan := filepath.Join(t.TempDir(), "spec-ran")
	dir := f.commandSpec(specRan)
	boundRan := filepath.Join(t.TempDir(), "bound-ran")
	applyState(t, dir)

	f.writeBindings(`binding "token" {
  source = "env:UNSCOPED_TOKEN"
}

binding "token" {
  source = "command:touch ` + boundRan + `; echo sk-bound-literal"
  config = "` + dir + `"
}

binding "token" {
  source = "env:ELSEWHERE"
  config = "` + filepath.Join(dir, "sub") + `"
}
`)
	r := f.mustRun(ExitOK, "plan", "-detailed-exitcode", dir)
	if !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("a binding changed the plan:\n%s", r)
	}
	if !strings.Contains(r.stdout, "secret.token: command (bindings ~/.config/sbx/bindings.hcl:5), for sandbox.box") {
		t.Errorf("plan does not show the scoped binding:\n%s", r)
	}
	js := f.mustRun(ExitOK, "plan", "-json", dir)
	for _, out := range []string{r.stdout, js.stdout} {
		if strings.Contains(out, "sk-bound-literal") || strings.Contains(out, boundRan) {
			t.Errorf("the plan shows the binding's command:\n%s", out)
		}
	}
	if !strings.Contains(js.stdout, `"from": "bindings"`) || !strings.Contains(js.stdout, `"kind": "command"`) {
		t.Errorf("plan -json lacks the secret's source:\n%s", js.stdout)
	}
	noFile(t, boundRan, "plan: the binding's command")
	noFile(t, specRan, "plan: the spec's command")

	// Outside the scope, the unscoped binding; the plan is the same.
	f.writeBindings("binding \"token\" {\n  source = \"env:UNSCOPED_TOKEN\"\n}\n\nbinding \"token\" {\n  source = \"command:x\"\n  config = \"/elsewhere\"\n}\n")
	r = f.mustRun(ExitOK, "plan", "-detailed-exitcode", dir)
	if !strings.Contains(r.stdout, "No changes.") || !strings.Contains(r.stdout, "secret.token: env:UNSCOPED_TOKEN (bindings ~/.config/sbx/bindings.hcl:1)") {
		t.Errorf("plan with the unscoped binding:\n%s", r)
	}

	// SBX_BINDINGS names another file.
	other := filepath.Join(t.TempDir(), "b.hcl")
	writeFile(t, other, "binding \"token\" {\n  source = \"file:/run/token\"\n}\n")
	f.environ = append(f.environ, "SBX_BINDINGS="+other)
	r = f.mustRun(ExitOK, "plan", dir)
	if !strings.Contains(r.stdout, "secret.token: file:/run/token (bindings "+other+":1)") {
		t.Errorf("plan with SBX_BINDINGS:\n%s", r)
	}
}

// TestBindingsFileOthersControlRefused: a bindings file that is group
// writable, a symbolic link or another user's is refused by every verb
// that reads it, before anything else happens.
func TestBindingsFileOthersControlRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		make  func(f *fixture, path string)
		about string
	}{
		{"group-writable", func(f *fixture, path string) {
			if err := os.Chmod(path, 0o620); err != nil {
				t.Fatal(err)
			}
		}, "may be written by other users (mode 0620)"},
		{"symbolic link", func(f *fixture, path string) {
			real := filepath.Join(filepath.Dir(path), "real.hcl")
			if err := os.Rename(path, real); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, path); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"another user's", func(f *fixture, path string) {
			if os.Geteuid() != 0 {
				t.Skip("only root can give a file to another user")
			}
			if err := os.Chown(path, 4321, 4321); err != nil {
				t.Fatal(err)
			}
		}, "is owned by uid 4321"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			marker := filepath.Join(t.TempDir(), "ran")
			dir := f.commandSpec(filepath.Join(t.TempDir(), "spec-ran"))
			path := f.writeBindings("binding \"token\" {\n  source = \"command:touch " + marker + "; echo v\"\n}\n")
			tc.make(f, path)
			for _, args := range [][]string{
				{"plan", dir},
				{"run", dir, "box", "--", "true"},
				{"apply", "-auto-approve", dir},
			} {
				r := f.mustRun(ExitError, args...)
				if !strings.Contains(r.stderr, "Bindings file refused") || !strings.Contains(r.stderr, tc.about) {
					t.Errorf("sbx %s: want the file refused saying %q:\n%s", args[0], tc.about, r)
				}
			}
			noFile(t, marker, "the refused file's command")
		})
	}
}

// TestApplyShowsSecretSourcesWithNoChanges: an apply with nothing to
// change still reads the running sandboxes' secrets, so it shows where
// from, as plan does.
func TestApplyShowsSecretSourcesWithNoChanges(t *testing.T) {
	var out strings.Builder
	env := &Env{Stdout: &out, Stderr: &out}
	h := newHooks(t.Context(), env, newView(env, true))
	p := &plan.Plan{Against: "state", Secrets: []plan.SecretReport{{Secret: "token", Sandboxes: []string{"sandbox.box"},
		Kind: "command", From: "bindings", Origin: policy.Origin{Block: "binding.token", File: "~/.config/sbx/bindings.hcl", Line: 3}}}}
	if err := h.ShowPlan(p); err != nil {
		t.Fatal(err)
	}
	if want := "secret.token: command (bindings ~/.config/sbx/bindings.hcl:3), for sandbox.box"; !strings.Contains(out.String(), want) {
		t.Errorf("apply with no changes shows\n%s\nwant %q", out.String(), want)
	}
}
