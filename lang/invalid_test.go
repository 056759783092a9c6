package lang

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"golang.org/x/tools/txtar"
)

// An invalid fixture is a txtar archive of configuration files. Each line
// that should get an error carries a comment "# ERROR: <text>", where text
// is a substring of the error's summary; the test checks that every such
// error is reported at that file and line, and that no other error is.
//
// An optional "args" member is not written to the directory; its lines set
// Load's options and expect errors that have no source position:
//
//	-var NAME=VALUE
//	-var-file PATH       (relative to the configuration directory)
//	env NAME=VALUE
//	ERROR: <text>        (an error without a subject)

type wantDiag struct {
	file    string // base name; empty for an error without a subject
	line    int
	summary string
}

func (w wantDiag) String() string {
	if w.file == "" {
		return fmt.Sprintf("(no position): %s", w.summary)
	}
	return fmt.Sprintf("%s:%d: %s", w.file, w.line, w.summary)
}

func TestInvalid(t *testing.T) {
	paths, err := filepath.Glob("testdata/invalid/*.txtar")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 25 {
		t.Fatalf("found %d invalid fixtures, want at least 25", len(paths))
	}
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(p)
			if err != nil {
				t.Fatal(err)
			}
			dir, opts, want := setupFixture(t, ar)
			if len(want) == 0 {
				t.Fatalf("%s expects no errors; an invalid fixture must mark at least one", p)
			}
			cfg, diags := Load(dir, opts)
			checkConfigShape(t, cfg)
			checkDiags(t, dir, diags, want)
		})
	}
}

// setupFixture writes the archive's files into a temporary directory and
// collects the expected errors.
func setupFixture(t *testing.T, ar *txtar.Archive) (string, Options, []wantDiag) {
	t.Helper()
	dir := t.TempDir()
	var opts Options
	var want []wantDiag
	for _, f := range ar.Files {
		if f.Name == "args" {
			sc := bufio.NewScanner(strings.NewReader(string(f.Data)))
			for sc.Scan() {
				line := strings.TrimSpace(sc.Text())
				switch {
				case line == "":
				case strings.HasPrefix(line, "-var "):
					opts.Vars = append(opts.Vars, strings.TrimPrefix(line, "-var "))
				case strings.HasPrefix(line, "-var-file "):
					opts.VarFiles = append(opts.VarFiles, filepath.Join(dir, strings.TrimPrefix(line, "-var-file ")))
				case strings.HasPrefix(line, "env "):
					opts.Environ = append(opts.Environ, strings.TrimPrefix(line, "env "))
				case strings.HasPrefix(line, "ERROR: "):
					want = append(want, wantDiag{summary: strings.TrimPrefix(line, "ERROR: ")})
				default:
					t.Fatalf("args: cannot parse %q", line)
				}
			}
			continue
		}
		full := filepath.Join(dir, f.Name)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(f.Data), "\n") {
			if _, msg, ok := strings.Cut(line, "# ERROR: "); ok {
				want = append(want, wantDiag{file: filepath.Base(f.Name), line: i + 1, summary: strings.TrimSpace(msg)})
			}
		}
	}
	return dir, opts, want
}

func checkDiags(t *testing.T, dir string, diags hcl.Diagnostics, want []wantDiag) {
	t.Helper()
	matched := make([]bool, len(want))
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		var got wantDiag
		got.summary = d.Summary
		if d.Subject != nil {
			got.file = filepath.Base(d.Subject.Filename)
			got.line = d.Subject.Start.Line
			if filepath.Dir(d.Subject.Filename) != dir && !strings.HasPrefix(d.Subject.Filename, "<") {
				t.Errorf("diagnostic %q names file %q, want a file in %s", d.Summary, d.Subject.Filename, dir)
			}
		}
		found := false
		for i, w := range want {
			if w.file == got.file && w.line == got.line && strings.Contains(d.Summary, w.summary) {
				matched[i] = true
				found = true
			}
		}
		if !found {
			t.Errorf("unexpected error %s (%s)", got, d.Detail)
		}
	}
	for i, w := range want {
		if !matched[i] {
			t.Errorf("missing error %s", w)
		}
	}
	if t.Failed() {
		for _, d := range diags {
			t.Logf("got: %s", d.Error())
		}
	}
}

// checkConfigShape checks what Load promises even on failure.
func checkConfigShape(t *testing.T, cfg *Config) {
	t.Helper()
	if cfg == nil {
		t.Fatal("Load returned a nil Config")
	}
	if cfg.Sources == nil || cfg.Images == nil || cfg.Sandboxes == nil {
		t.Fatal("Load returned a Config without its maps")
	}
	for _, name := range cfg.Files {
		found := false
		for key := range cfg.Sources {
			if filepath.Base(key) == name {
				found = true
			}
		}
		if !found {
			t.Errorf("Sources lacks %s", name)
		}
	}
}
