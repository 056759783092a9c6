package netstack

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestNothingDialsOut reads the package's own code and fails on any use
// of what reaches the host's network or resolver: the net package's
// dialing, listening and lookups, and the DNS library's client. The
// network's one promise is that nothing leaves the host but through
// Handle, and that no DNS query is ever forwarded: a regression there
// would pass every behavioural test that has no upstream to notice it.
func TestNothingDialsOut(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := map[string][]string{
		"net": {"Dial", "Listen", "Lookup", "Resolve", "Resolver", "Dialer", "FileConn", "FilePacketConn"},
		"dns": {"Client", "Exchange", "Dial", "ListenAndServe", "Server"},
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			switch p := strings.Trim(imp.Path.Value, `"`); {
			case p == "net/http", p == "os/exec", strings.HasPrefix(p, "gvisor.dev/gvisor/pkg/tcpip/link/fdbased"),
				strings.HasPrefix(p, "gvisor.dev/gvisor/pkg/tcpip/link/tun"):
				t.Errorf("%s imports %s", name, p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			for _, prefix := range forbidden[pkg.Name] {
				if strings.HasPrefix(sel.Sel.Name, prefix) {
					t.Errorf("%s: %s.%s reaches the host's network", fset.Position(sel.Pos()), pkg.Name, sel.Sel.Name)
				}
			}
			return true
		})
	}
	if checked < 5 {
		t.Fatalf("checked %d files; is the test running in the package's directory?", checked)
	}
}
