package sandbox

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestBenchKnobsOnlyInBenchmarks: machine.Bench weakens a sandbox (no
// policy on QEMU's user-mode network, no rules on QEMU's 9p export, no
// memory returned to the host), so only the benchmarks (bench/), the
// machine's own package and this package, which passes Options.Bench
// through, name it.
func TestBenchKnobsOnlyInBenchmarks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	allowed := []string{"bench/", "internal/machine/", "internal/sandbox/sandbox.go"}
	found := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		local := ""
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/sbx-dev/sbx/internal/machine" {
				local = "machine"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Bench" {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != local {
				return true
			}
			found++
			for _, a := range allowed {
				if strings.HasPrefix(rel, a) {
					return true
				}
			}
			t.Errorf("%s names machine.Bench: only benchmarks may", rel)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("no use of machine.Bench found at all: the test looks in the wrong place")
	}
}
