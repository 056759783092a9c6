package match

import (
	"strings"
	"testing"
	"time"
)

// TestMountRulesCostDeepPath: the guest chooses how deep its paths are
// (the file server takes relative paths up to 4095 bytes, so up to 2048
// names) and the server classifies every name it lists, so one Classify
// of the deepest path under a usual set of rules must stay well within
// 10ms. Checking every ancestor with a table each took seconds here
// (2.5s for these rules on an idle machine), and the backtracking
// matcher before it took as long for "**" patterns.
func TestMountRulesCostDeepPath(t *testing.T) {
	rules := []string{"*.pem", ".env", "secrets/", ".git/config", "docs/*.md", "node_modules", "**/id_rsa*", "build/**", "a/**/b/**/c", "**/a/**/a/**/x", "*a*a*a*a*a*a*a*a*b", "**/[0-9]*[^a]"}
	r, err := CompileMountRules(rules, rules, rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "x.pem.no", "**", "[ab]", strings.Repeat("a", 4094)} {
		rel := strings.TrimSuffix(strings.Repeat(name+"/", 4095/(len(name)+1)), "/")
		best := time.Hour
		for range 3 {
			start := time.Now()
			if c := r.Classify(rel); c != Plain {
				t.Fatalf("Classify(%.20s/...) = %v, want plain", name, c)
			}
			best = min(best, time.Since(start))
		}
		if best > 10*time.Millisecond {
			t.Errorf("Classify of a path of %d names %.20q took %v", len(Split(rel)), name, best)
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

// TestPathAndRefCostLongInputs: request targets reach the engine up to
// its header bound (64 KiB and Go's 4 KiB slack) and push refs up to
// 1024 bytes (gitpush's bound); matching the longest against patterns
// with several "**" and stars stays well within 10ms.
func TestPathAndRefCostLongInputs(t *testing.T) {
	timed := func(what string, f func() bool, want bool) {
		t.Helper()
		best := time.Hour
		for range 3 {
			start := time.Now()
			if got := f(); got != want {
				t.Fatalf("%s = %v, want %v", what, got, want)
			}
			best = min(best, time.Since(start))
		}
		if best > 10*time.Millisecond {
			t.Errorf("%s took %v", what, best)
		}
	}
	const size = 68 << 10
	for _, pat := range []string{"/**/a/**/a/**/a/**/x", "/**/*a*a*a*a*a*a*a*a*b/**", "/*/*/*/*/**/*x"} {
		p, err := CompilePath(pat)
		if err != nil {
			t.Fatal(err)
		}
		deep := "/" + strings.Repeat("a/", size/2)
		wide := "/" + strings.Repeat("a", size)
		enc := "/" + strings.Repeat("a%2Fa/", size/6)
		timed("Path("+pat+").Match(deep)", func() bool { return p.Match(deep) }, false)
		timed("Path("+pat+").Match(wide)", func() bool { return p.Match(wide) }, false)
		timed("Path("+pat+").Match(encoded slashes)", func() bool { return p.Match(enc) }, false)
	}
	r, err := CompileRef("refs/" + strings.Repeat("**/a/", 40) + "x")
	if err != nil {
		t.Fatal(err)
	}
	ref := "refs/" + strings.Repeat("a/", 509) + "y"
	timed("Ref.Match(deep ref)", func() bool { return r.Match(ref) }, false)
}
