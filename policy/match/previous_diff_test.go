package match

import (
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"
)

// The tests in this file hold the matchers to the previous
// implementations (previous_test.go): for every generated input the new
// matcher must give the previous one's answer, except where a change
// was made on purpose (each named where it is allowed for). A
// difference that lets a guest see, write or push what it could not
// before is a hole; one the other way a regression.

// mountElems and mountNames are the alphabets of generated mount
// patterns and of the names of generated paths: names that look like
// patterns, dots, escapes and brackets, so that a name is never read as
// a pattern.
var (
	mountElems = []string{"**", "*", "?", "a", "b", "ab", "a*", "*b", "[ab]", "[!a]", `\*`, `\\`, ".a", "..a", "[a-c]", "é", "*.pem", "[", "", ".", ".."}
	mountNames = []string{"a", "b", "ab", "c", "*", "**", "?", "[ab]", `\`, `\*`, ".a", "..a", "...", "é", "x.pem", "[", "]", "-"}
)

func genMountPattern(rng *rand.Rand) string {
	n := 1 + rng.Intn(4)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = mountElems[rng.Intn(len(mountElems))]
	}
	s := strings.Join(parts, "/")
	switch rng.Intn(8) {
	case 0:
		s += "/"
	case 1:
		s = "/" + s
	case 2:
		s = "!" + s
	}
	return s
}

func genRel(rng *rand.Rand, depth int) string {
	names := make([]string, rng.Intn(depth+1))
	for i := range names {
		names[i] = mountNames[rng.Intn(len(mountNames))]
	}
	return strings.Join(names, "/")
}

// checkMountAgrees compares the new mount rules with the previous ones
// on one set of patterns and one path.
func checkMountAgrees(t *testing.T, hide, readonly, tmpfs []string, rel string) {
	t.Helper()
	nr, nerr := CompileMountRules(hide, readonly, tmpfs)
	pr, perr := prevCompileRules(hide, readonly, tmpfs)
	if (nerr == nil) != (perr == nil) {
		t.Fatalf("hide %q readonly %q tmpfs %q: compile error %v, previously %v", hide, readonly, tmpfs, nerr, perr)
	}
	if nerr != nil {
		return
	}
	if got, want := nr.Classify(rel), pr.classify(rel); got != want {
		t.Fatalf("hide %q readonly %q tmpfs %q: Classify(%q) = %v, previously %v", hide, readonly, tmpfs, rel, got, want)
	}
	if got, want := nr.Hidden(rel), pr.classify(rel) == Hidden; got != want {
		t.Fatalf("hide %q: Hidden(%q) = %v, previously %v", hide, rel, got, want)
	}
	gr, gok := nr.InMemory(rel)
	wr, wok := pr.inMemory(rel)
	if gr != wr || gok != wok {
		t.Fatalf("tmpfs %q: InMemory(%q) = %q, %v, previously %q, %v", tmpfs, rel, gr, gok, wr, wok)
	}
	if got, want := nr.HiddenBy(rel), pr.hiddenBy(rel); !slices.Equal(got, want) {
		t.Fatalf("hide %q: HiddenBy(%q) = %q, previously %q", hide, rel, got, want)
	}
	if got, want := nr.TmpfsLiterals(), pr.tmpfsLiterals(); !slices.Equal(got, want) {
		t.Fatalf("tmpfs %q: TmpfsLiterals = %q, previously %q", tmpfs, got, want)
	}
	_, ro := MatchAny(nr.ReadOnly, Split(rel))
	_, pro := prevMatchAny(pr.readonly, prevSplit(rel))
	if ro != pro {
		t.Fatalf("readonly %q: MatchAny(%q) = %v, previously %v", readonly, rel, ro, pro)
	}
}

// TestMountRulesAgreeWithPrevious compares compiling and every query
// the file server, plan and fanout make with the previous file server's
// rules, on random patterns and paths.
func TestMountRulesAgreeWithPrevious(t *testing.T) {
	rng := rand.New(rand.NewSource(1919))
	deadline := time.Now().Add(3 * time.Second)
	for n := 0; n < 40000 && time.Now().Before(deadline); n++ {
		var sets [3][]string
		for i := range sets {
			for range rng.Intn(3) {
				sets[i] = append(sets[i], genMountPattern(rng))
			}
		}
		checkMountAgrees(t, sets[0], sets[1], sets[2], genRel(rng, 6))
	}
}

// FuzzMountAgreesWithPrevious: one pattern of each kind and a path, the
// path's names split at "/"; bounded so that the previous backtracking
// matcher stays quick.
func FuzzMountAgreesWithPrevious(f *testing.F) {
	f.Add("secrets/", "*.pem", "build/**", "a/secrets/x.pem")
	f.Add("**/a/**/b", "[ab]", "a*", `a/\*/b`)
	f.Add(`\*`, "**", "..a", "*/..a/[")
	f.Fuzz(func(t *testing.T, hide, readonly, tmpfs, rel string) {
		for _, s := range []string{hide, readonly, tmpfs} {
			if len(s) > 64 || strings.Count(s, "**") > 3 {
				return
			}
		}
		if len(rel) > 256 || strings.Count(rel, "/") > 24 {
			return
		}
		checkMountAgrees(t, []string{hide}, []string{readonly}, []string{tmpfs}, rel)
	})
}

var (
	refElems = []string{"refs", "heads", "tags", "*", "**", "a", "b", "a*", "*b", "a-*", "x.y", ".a", "a.lock", "", "a..b", "@{", "[a]"}
	refNames = []string{"refs", "heads", "tags", "a", "b", "ab", "a-1", "x.y", "c"}
)

func checkRefAgrees(t *testing.T, pat, ref string) {
	t.Helper()
	p, err := CompileRef(pat)
	perr := prevCheckRefPattern(pat)
	if (err == nil) != (perr == nil) {
		t.Fatalf("CompileRef(%q) error %v, previously lang said %v", pat, err, perr)
	}
	if err != nil {
		return
	}
	if got, want := p.Match(ref), prevRefMatch([]string{pat}, ref); got != want {
		t.Fatalf("ref pattern %q: Match(%q) = %v, previously %v", pat, ref, got, want)
	}
}

// TestRefAgreesWithPrevious compares CompileRef with what lang
// accepted before and Ref.Match with the engine's previous git push
// matcher. (The engine itself accepted more patterns than lang before,
// "refs/heads/a..b" for one; it refuses them now, on purpose.)
func TestRefAgreesWithPrevious(t *testing.T) {
	rng := rand.New(rand.NewSource(1920))
	deadline := time.Now().Add(2 * time.Second)
	for n := 0; n < 40000 && time.Now().Before(deadline); n++ {
		pat := make([]string, 1+rng.Intn(6))
		for i := range pat {
			pat[i] = refElems[rng.Intn(len(refElems))]
		}
		if rng.Intn(4) > 0 {
			pat[0] = "refs"
		}
		ref := make([]string, 1+rng.Intn(6))
		for i := range ref {
			ref[i] = refNames[rng.Intn(len(refNames))]
		}
		checkRefAgrees(t, strings.Join(pat, "/"), strings.Join(ref, "/"))
	}
}

func FuzzRefAgreesWithPrevious(f *testing.F) {
	f.Add("refs/heads/agent/*", "refs/heads/agent/x")
	f.Add("refs/**/x", "refs/x")
	f.Fuzz(func(t *testing.T, pat, ref string) {
		if len(pat) > 128 || len(ref) > 256 || strings.Count(pat, "**") > 8 {
			return
		}
		checkRefAgrees(t, pat, ref)
	})
}

var (
	pathSegs = []string{"*", "**", "a", "b", "a*", "*b", "é", ";", "", ".", "..", "a b", "%", "?", "\\", "**x", "ａ"}
	reqSegs  = []string{"a", "b", "ab", "%2F", "%2f", "a%2Fb", "%61", "%2e", ".", "..", ";", "", "é", "%C3%A9", "%c0%ae", "\\", "%5C", "%25", "%", "%zz", "\uff0e", "a;b", "*"}
)

func checkPathAgrees(t *testing.T, pat, req string) {
	t.Helper()
	p, err := CompilePath(pat)
	perr := prevCheckPathPattern(pat)
	if (err == nil) != (perr == nil) {
		t.Fatalf("CompilePath(%q) error %v, previously %v", pat, err, perr)
	}
	if err != nil {
		return
	}
	if got, want := p.Match(req), prevMatchPath(pat, req); got != want {
		t.Fatalf("path pattern %q: Match(%q) = %v, previously %v", pat, req, got, want)
	}
}

// TestPathAgreesWithPrevious compares CompilePath and Path.Match with
// policy's CheckPathPattern and MatchPath, which lang and the engine
// used before.
func TestPathAgreesWithPrevious(t *testing.T) {
	rng := rand.New(rand.NewSource(1921))
	deadline := time.Now().Add(2 * time.Second)
	for n := 0; n < 40000 && time.Now().Before(deadline); n++ {
		pat := make([]string, 1+rng.Intn(5))
		for i := range pat {
			pat[i] = pathSegs[rng.Intn(len(pathSegs))]
		}
		req := make([]string, 1+rng.Intn(5))
		for i := range req {
			req[i] = reqSegs[rng.Intn(len(reqSegs))]
		}
		ps, rs := "/"+strings.Join(pat, "/"), "/"+strings.Join(req, "/")
		if rng.Intn(10) == 0 {
			ps = strings.TrimPrefix(ps, "/")
		}
		if rng.Intn(10) == 0 {
			rs = strings.TrimPrefix(rs, "/")
		}
		checkPathAgrees(t, ps, rs)
	}
}

func FuzzPathAgreesWithPrevious(f *testing.F) {
	f.Add("/v1/**", "/v1/a%2Fb")
	f.Add("/a/*/b/", "/a/x/b/")
	f.Fuzz(func(t *testing.T, pat, req string) {
		if len(pat) > 256 || len(req) > 4096 {
			return
		}
		checkPathAgrees(t, pat, req)
	})
}
