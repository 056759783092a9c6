package archtest

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// module is the module's path; every pattern in these tests is relative
// to it.
const module = "github.com/sbx-dev/sbx"

// root is the module's directory, two levels above this package's.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no module root at %s: %v", dir, err)
	}
	return dir
}

// rel is a module package's path relative to the module ("" for the
// root package), and ok false for a package outside the module.
func rel(path string) (string, bool) {
	if path == module {
		return "", true
	}
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r, true
	}
	return "", false
}

// match reports whether the module-relative path p matches pattern:
// "x" is x itself, "x/..." is x and every package under it, "." the
// root package, "..." every package of the module.
func match(pattern, p string) bool {
	switch pattern {
	case ".":
		return p == ""
	case "...":
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

func matchAny(patterns []string, p string) bool {
	for _, pat := range patterns {
		if match(pat, p) {
			return true
		}
	}
	return false
}

// load loads the module's packages (not their tests) with mode, for
// goos, and fails the test on any package's error.
func load(t *testing.T, mode packages.LoadMode, goos string, patterns ...string) []*packages.Package {
	t.Helper()
	cfg := &packages.Config{Mode: mode, Dir: root(t), Env: os.Environ()}
	if goos != "" && goos != runtime.GOOS {
		cfg.Env = append(cfg.Env, "GOOS="+goos, "CGO_ENABLED=0")
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		t.Fatal(err)
	}
	var errs int
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			if errs++; errs <= 10 {
				t.Errorf("%s (%s): %v", p.PkgPath, goos, e)
			}
		}
	})
	if errs > 0 {
		t.FailNow()
	}
	return pkgs
}
