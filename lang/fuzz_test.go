package lang

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"golang.org/x/tools/txtar"
)

// FuzzLoad loads arbitrary input as a one-file configuration. Load must
// not panic, must return a Config, and every error must say what is wrong
// (a summary) and, when it has one, point into a file that was read.
func FuzzLoad(f *testing.F) {
	f.Add(fullImages + fullPolicy + fullSandboxes)
	paths, err := filepath.Glob("testdata/invalid/*.txtar")
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range paths {
		ar, err := txtar.ParseFile(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range ar.Files {
			if strings.HasSuffix(file.Name, ".hcl") {
				f.Add(string(file.Data))
			}
		}
	}
	f.Fuzz(func(t *testing.T, src string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, diags := Load(dir, Options{Vars: []string{"x=1"}, Environ: []string{"SBX_VAR_y=2"}})
		if cfg == nil || cfg.Sources == nil {
			t.Fatal("Load returned no Config or no Sources")
		}
		for _, d := range diags {
			if d.Severity != hcl.DiagError {
				continue
			}
			if d.Summary == "" {
				t.Errorf("error without a summary: %#v", d)
			}
			if d.Subject == nil {
				// Only the undeclared -var x has no position.
				if d.Summary != "Value for undeclared variable" && d.Summary != "Invalid value for variable" {
					t.Errorf("error without a subject: %s", d.Error())
				}
				continue
			}
			if _, ok := cfg.Sources[d.Subject.Filename]; !ok && !strings.HasPrefix(d.Subject.Filename, "<") {
				t.Errorf("error points at %q, which is not among the Sources", d.Subject.Filename)
			}
		}
	})
}
