package bindings

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

// TestInvalid parses each member of testdata/invalid.txtar and checks
// that the errors are exactly those its "# ERROR: <summary>" comments
// mark, each at its line.
func TestInvalid(t *testing.T) {
	ar, err := txtar.ParseFile("testdata/invalid.txtar")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ar.Files {
		t.Run(m.Name, func(t *testing.T) {
			var want []string
			for i, line := range strings.Split(string(m.Data), "\n") {
				if _, s, ok := strings.Cut(line, "# ERROR: "); ok {
					want = append(want, fmt.Sprintf("%d: %s", i+1, strings.TrimSpace(s)))
				}
			}
			path := filepath.Join("/home/user/.config/sbx", m.Name)
			f, diags := Parse(m.Data, path, Options{Home: "/home/user"})
			var got []string
			for _, d := range diags {
				if d.Subject == nil {
					t.Errorf("error without a position: %s: %s", d.Summary, d.Detail)
					continue
				}
				if d.Subject.Filename != path {
					t.Errorf("error in %s, not %s: %s", d.Subject.Filename, path, d.Summary)
				}
				got = append(got, fmt.Sprintf("%d: %s", d.Subject.Start.Line, d.Summary))
			}
			for _, w := range want {
				line, summary, _ := strings.Cut(w, ": ")
				i := slices.IndexFunc(got, func(g string) bool {
					gl, gs, _ := strings.Cut(g, ": ")
					return gl == line && strings.Contains(gs, summary)
				})
				if i < 0 {
					t.Errorf("missing error at line %s: %s\ngot %q", line, summary, got)
					continue
				}
				got = slices.Delete(got, i, i+1)
			}
			for _, g := range got {
				t.Errorf("unexpected error at line %s", g)
			}
			if f == nil {
				t.Fatal("Parse returned no file")
			}
			for _, b := range f.Bindings {
				if b.Source == "" {
					t.Errorf("binding %q at line %d was kept without a source", b.Secret, b.DeclRange.Start.Line)
				}
			}
		})
	}
}

func TestParse(t *testing.T) {
	src := `# Where this host reads the secrets.
binding "codex_key" {
  source = "command:gh auth token"
  config = "~/src/project"
}

binding "codex_key" {
  source = "env:CODEX_API_KEY"
}

binding "token" {
  source = "file:~/.config/token"
  config = "/srv/work/"
}
`
	f, diags := Parse([]byte(src), "/home/u/.config/sbx/bindings.hcl", Options{Home: "/home/u"})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var got []string
	for _, b := range f.Bindings {
		got = append(got, fmt.Sprintf("%s %s %q %q %d", b.Secret, b.Source, b.resolve, b.Config, b.DeclRange.Start.Line))
	}
	want := []string{
		`codex_key command:gh auth token "command:gh auth token" "/home/u/src/project" 2`,
		`codex_key env:CODEX_API_KEY "env:CODEX_API_KEY" "" 7`,
		`token file:~/.config/token "file:/home/u/.config/token" "/srv/work" 11`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("bindings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPath(t *testing.T) {
	for _, tc := range []struct {
		environ []string
		want    string
		named   bool
	}{
		{[]string{"HOME=/home/u"}, "/home/u/.config/sbx/bindings.hcl", false},
		{[]string{"HOME=/home/u", "XDG_CONFIG_HOME=/cfg"}, "/cfg/sbx/bindings.hcl", false},
		// A relative XDG_CONFIG_HOME is ignored, as the XDG rules say.
		{[]string{"HOME=/home/u", "XDG_CONFIG_HOME=cfg"}, "/home/u/.config/sbx/bindings.hcl", false},
		{[]string{"HOME=/home/u", "XDG_CONFIG_HOME=/cfg", "SBX_BINDINGS=/etc/b.hcl"}, "/etc/b.hcl", true},
	} {
		got, home, named, err := Path(tc.environ)
		if err != nil || got != tc.want || named != tc.named || home != "/home/u" {
			t.Errorf("Path(%q) = %q, %q, %v, %v; want %q, /home/u, %v", tc.environ, got, home, named, err, tc.want, tc.named)
		}
	}
	if _, _, _, err := Path([]string{"PATH=/bin"}); err == nil || !strings.Contains(err.Error(), EnvFile) {
		t.Errorf("Path with no HOME: %v, want an error naming %s", err, EnvFile)
	}
}
