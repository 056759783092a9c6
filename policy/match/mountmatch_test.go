package match

import (
	"math/rand"
	"path"
	"strings"
	"testing"
)

// recursiveMatch is the backtracking matcher the file server used
// before, kept as the reference matchElems must agree with.
func recursiveMatch(pat, names []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			if len(rest) == 0 {
				return len(names) > 0
			}
			for i := 0; i <= len(names); i++ {
				if recursiveMatch(rest, names[i:]) {
					return true
				}
			}
			return false
		}
		if len(names) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], names[0]); !ok {
			return false
		}
		pat, names = pat[1:], names[1:]
	}
	return len(names) == 0
}

// TestMountMatchAgreesWithBacktracking compares matchElems with the
// backtracking matcher on random short patterns and paths.
func TestMountMatchAgreesWithBacktracking(t *testing.T) {
	rng := rand.New(rand.NewSource(19))
	elems := []string{"**", "*", "a", "b", "a*", "?", "[ab]"}
	names := []string{"a", "b", "ab", "c"}
	for n := 0; n < 20000; n++ {
		pat := make([]string, 1+rng.Intn(5))
		for i := range pat {
			pat[i] = elems[rng.Intn(len(elems))]
		}
		p := make([]string, rng.Intn(6))
		for i := range p {
			p[i] = names[rng.Intn(len(names))]
		}
		if got, want := matchElems(pat, p), recursiveMatch(pat, p); got != want {
			t.Fatalf("matchElems(%q, %q) = %v, the backtracking matcher says %v", pat, p, got, want)
		}
	}
}

// TestMountMatchBounded: a pattern with many "**" against a deep path
// that almost matches reads each name once per pattern name.
func TestMountMatchBounded(t *testing.T) {
	p, err := CompileMount(strings.Repeat("**/a/", 20) + "x")
	if err != nil {
		t.Fatal(err)
	}
	names := strings.Split(strings.Repeat("a/", 400)+"y", "/")
	var ok bool
	n := counted(func() { _, ok = MatchAny([]*Mount{p}, names) })
	if ok {
		t.Error("matched a path without the final name")
	}
	if bound := (len(p.elems) + 1) * len(names); n == 0 || n > bound {
		t.Errorf("matching took %d steps; want 1 to %d", n, bound)
	}
}
