package sandboxnet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/bindings"
	"github.com/sbx-dev/sbx/policy"
)

func specSecret(name, source string) policy.SecretBinding {
	return policy.SecretBinding{Name: name, Env: strings.ToUpper(name), Source: source,
		Hosts:  []policy.HostPattern{policy.MustHostPattern("api.example.com")},
		Origin: policy.Origin{Block: "secret." + name, File: "main.hcl", Line: 7}}
}

func parseBindings(t *testing.T, dir, src string) *bindings.File {
	t.Helper()
	f, diags := bindings.Parse([]byte(src), filepath.Join(dir, "bindings.hcl"), bindings.Options{Home: dir})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return f
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestResolveSecretsNeverRunsASpecCommand: a command the spec names as a
// secret's source is never run. Without a binding the start fails,
// saying what to bind, before any source is read (a binding's command
// for another secret does not run either); with one, the binding's
// command runs, in the bindings file's directory, and the spec's does
// not.
func TestResolveSecretsNeverRunsASpecCommand(t *testing.T) {
	configDir, bindDir, marks := t.TempDir(), t.TempDir(), t.TempDir()
	specRan := filepath.Join(marks, "spec-ran")
	boundRan := filepath.Join(marks, "bound-ran")
	p := policy.Sandbox{Secrets: []policy.SecretBinding{
		specSecret("other", ""),
		specSecret("tok", "command:touch "+specRan+"; echo from-the-spec"),
	}}
	otherOnly := parseBindings(t, bindDir, `binding "other" {
  source = "command:touch `+boundRan+`; echo other"
}
`)
	_, err := ResolveSecrets(context.Background(), p, SecretSources{ConfigDir: configDir, Bindings: otherOnly, Environ: []string{"PATH=" + os.Getenv("PATH")}})
	var unbound *bindings.UnboundError
	if !errors.As(err, &unbound) || unbound.Secret != "tok" {
		t.Fatalf("ResolveSecrets without a binding for tok: %v; want an *UnboundError for it", err)
	}
	for _, want := range []string{"secret.tok (main.hcl:7)", `binding "tok"`, filepath.Join(bindDir, "bindings.hcl")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
	if exists(specRan) {
		t.Error("the spec's command ran")
	}
	if exists(boundRan) {
		t.Error("a binding's command ran although the start was going to fail")
	}

	both := parseBindings(t, bindDir, `binding "other" {
  source = "env:OTHER_VALUE"
}
binding "tok" {
  source = "command:touch `+boundRan+`; pwd"
}
`)
	values, err := ResolveSecrets(context.Background(), p, SecretSources{ConfigDir: configDir, Bindings: both,
		Environ: []string{"PATH=" + os.Getenv("PATH"), "OTHER_VALUE=o"}})
	if err != nil {
		t.Fatal(err)
	}
	if exists(specRan) {
		t.Error("the spec's command ran although a binding covers the secret")
	}
	if !exists(boundRan) {
		t.Error("the binding's command did not run")
	}
	if got := string(values["tok"]); got != bindDir {
		t.Errorf("the binding's command ran in %q, want the bindings file's directory %q", got, bindDir)
	}
	if got := string(values["other"]); got != "o" {
		t.Errorf("secret.other = %q, want the bound environment variable's value", got)
	}
}

// TestResolveSecretsSpecSources: a spec's env: and file: sources are read
// when nothing binds the secret, and a binding wins over them.
func TestResolveSecretsSpecSources(t *testing.T) {
	configDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(configDir, "key.txt"), []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := policy.Sandbox{Secrets: []policy.SecretBinding{specSecret("a", "env:A"), specSecret("b", "file:key.txt"), specSecret("c", "env:C")}}
	f := parseBindings(t, t.TempDir(), "binding \"c\" {\n  source = \"env:C_BOUND\"\n}\n")
	values, err := ResolveSecrets(context.Background(), p, SecretSources{ConfigDir: configDir, Bindings: f,
		Environ: []string{"A=from-env", "C=from-the-spec", "C_BOUND=from-the-binding"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a": "from-env", "b": "from-file", "c": "from-the-binding"} {
		if got := string(values[name]); got != want {
			t.Errorf("secret.%s = %q, want %q", name, got, want)
		}
	}
	_, err = ResolveSecrets(context.Background(), p, SecretSources{ConfigDir: configDir, Bindings: f, Environ: []string{"A=x", "C=x"}})
	if err == nil || !strings.Contains(err.Error(), "secret.c (binding at ") || !strings.Contains(err.Error(), "C_BOUND is not set") {
		t.Errorf("a bound source that fails: %v; want the binding's position named", err)
	}
}

// TestResolveSecretsGivenValues: a secret whose value the caller gives
// (sbx node's from a Kubernetes Secret) takes it and its source is never
// read, even a command; the others are read as always; a value for a
// secret the policy does not declare, or for an OAuth login, and an
// empty value are refused without the value in the error.
func TestResolveSecretsGivenValues(t *testing.T) {
	configDir, marks := t.TempDir(), t.TempDir()
	ran := filepath.Join(marks, "ran")
	p := policy.Sandbox{Secrets: []policy.SecretBinding{
		specSecret("given", "command:touch "+ran+"; echo from-the-spec"),
		specSecret("local", "env:LOCAL"),
	}}
	src := SecretSources{ConfigDir: configDir, Environ: []string{"LOCAL=from-env"},
		Values: map[string][]byte{"given": []byte("from-kubernetes\n")}}
	values, err := ResolveSecrets(context.Background(), p, src)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(values["given"]); got != "from-kubernetes" {
		t.Errorf("secret.given = %q", got)
	}
	if got := string(values["local"]); got != "from-env" {
		t.Errorf("secret.local = %q", got)
	}
	if exists(ran) {
		t.Error("the source of a secret whose value was given was read")
	}

	oauth := specSecret("login", "file:auth.json")
	oauth.OAuth = &policy.OAuth{}
	for _, c := range []struct {
		what   string
		p      policy.Sandbox
		values map[string][]byte
		want   string
	}{
		{"undeclared", p, map[string][]byte{"given": []byte("v1"), "nosuch": []byte("hunter2")}, "secret.nosuch, which the sandbox does not declare"},
		{"oauth", policy.Sandbox{Secrets: []policy.SecretBinding{oauth}}, map[string][]byte{"login": []byte("hunter2")}, "OAuth login"},
		{"empty", p, map[string][]byte{"given": []byte("\n")}, "secret.given: the value given"},
		{"line break", p, map[string][]byte{"given": []byte("hunter2\nx")}, "line break"},
	} {
		_, err := ResolveSecrets(context.Background(), c.p, SecretSources{ConfigDir: configDir, Environ: src.Environ, Values: c.values})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v; want an error saying %q without the value", c.what, err, c.want)
		}
	}
}
