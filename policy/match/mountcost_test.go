package match

import (
	"strings"
	"testing"
)

// counted runs f with the matchers' step counter on and returns the
// steps they took.
func counted(f func()) int {
	n := 0
	steps = &n
	defer func() { steps = nil }()
	f()
	return n
}

// TestMountRulesCostDeepPath: the guest chooses how deep its paths are
// (the file server takes relative paths up to 4095 bytes, so up to 2048
// names) and the server classifies every name it lists, so one Classify
// of the deepest path must read the names once per pattern: at most
// (pattern names + 1) steps per path name and pattern. Checking every
// ancestor with a table each took the square of that (seconds for these
// rules), and the backtracking matcher before it more for "**"
// patterns. (Each step may call path.Match on one name, which is linear
// in the name and the pattern's name.)
func TestMountRulesCostDeepPath(t *testing.T) {
	rules := []string{"*.pem", ".env", "secrets/", ".git/config", "docs/*.md", "node_modules", "**/id_rsa*", "build/**", "a/**/b/**/c", "**/a/**/a/**/x", "*a*a*a*a*a*a*a*a*b", "**/[0-9]*[^a]"}
	r, err := CompileMountRules(rules, rules, rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "x.pem.no", "**", "[ab]", strings.Repeat("a", 4094)} {
		rel := strings.TrimSuffix(strings.Repeat(name+"/", 4095/(len(name)+1)), "/")
		n := len(Split(rel))
		bound := 0
		for _, set := range [][]*Mount{r.Hide, r.ReadOnly, r.Tmpfs} {
			for _, p := range set {
				bound += (len(p.elems) + 1) * n
			}
		}
		var c Class
		got := counted(func() { c = r.Classify(rel) })
		if c != Plain {
			t.Fatalf("Classify(%.20s/...) = %v, want plain", name, c)
		}
		if got == 0 || got > bound {
			t.Errorf("Classify of a path of %d names %.20q took %d steps; want 1 to %d", n, name, got, bound)
		}
	}
	// The same rules still match deep down, and report the shortest
	// prefix.
	deep := strings.Repeat("a/", 1500) + "b/c/x.pem"
	if c := r.Classify(deep); c != Hidden {
		t.Errorf("Classify(deep .../x.pem) = %v, want hidden", c)
	}
	if root, ok := r.InMemory(strings.Repeat("a/", 1000) + "node_modules/q/r"); !ok || root != strings.Repeat("a/", 1000)+"node_modules" {
		t.Errorf("InMemory(deep node_modules) = %q, %v", root, ok)
	}
}

// globBound is the most steps matching a path of n segments and l bytes
// against a pattern of k segments and p bytes may take, twice over (a
// path with an encoded "/" is matched twice): one table cell per pair of
// segments, and per pattern segment a glob comparison linear in the
// product of its length and each path segment's.
func globBound(k, p, n, l int) int {
	return 2 * (k*(n+1) + (l+n+1)*(p+k))
}

// TestPathAndRefCostLongInputs: request targets reach the engine up to
// its header bound (64 KiB and Go's 4 KiB slack) and push refs up to
// 1024 bytes (gitpush's bound); matching the longest against patterns
// with several "**" and stars stays within globBound, linear in the
// product of the sizes, where a backtracking matcher is exponential.
func TestPathAndRefCostLongInputs(t *testing.T) {
	check := func(what string, f func() bool, want bool, bound int) {
		t.Helper()
		var got bool
		n := counted(func() { got = f() })
		if got != want {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
		if n == 0 || n > bound {
			t.Errorf("%s took %d steps; want 1 to %d", what, n, bound)
		}
	}
	const size = 68 << 10
	for _, pat := range []string{"/**/a/**/a/**/a/**/x", "/**/*a*a*a*a*a*a*a*a*b/**", "/*/*/*/*/**/*x"} {
		p, err := CompilePath(pat)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range []struct{ what, path string }{
			{"deep", "/" + strings.Repeat("a/", size/2)},
			{"wide", "/" + strings.Repeat("a", size)},
			{"encoded slashes", "/" + strings.Repeat("a%2Fa/", size/6)},
		} {
			// Decoding turns each "%2F" into a segment of its own.
			n := strings.Count(in.path, "/") + strings.Count(in.path, "%2F")
			b := globBound(len(p.segs), len(pat), n, len(in.path))
			check("Path("+pat+").Match("+in.what+")", func() bool { return p.Match(in.path) }, false, b)
		}
	}
	r, err := CompileRef("refs/" + strings.Repeat("**/a/", 40) + "x")
	if err != nil {
		t.Fatal(err)
	}
	ref := "refs/" + strings.Repeat("a/", 509) + "y"
	check("Ref.Match(deep ref)", func() bool { return r.Match(ref) }, false, globBound(len(r.segs), len(r.src), strings.Count(ref, "/")+1, len(ref)))
}
