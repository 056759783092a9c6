package match

import (
	"strings"
	"testing"
)

// The validators and enforcers of sbx once disagreed on these patterns.
// Each test fixes the one answer both now give.

// TestMountDotAndEmptyNamesRefused: lang accepted "./secrets", "a//b" and
// "a[/]b" (it checked the whole pattern, and only for ".."), which the
// file server then refused at start. Refusing is the safe answer, and now
// the answer of both.
func TestMountDotAndEmptyNamesRefused(t *testing.T) {
	for _, p := range []string{"./secrets", "a/./b", "a//b", "cache//", "a[/]b", "../x", "x/.."} {
		_, err := CompileMount(p)
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("CompileMount(%q) = %v, want an error naming the pattern", p, err)
		}
		if _, err := CompileMountRules([]string{p}, nil, nil); err == nil || !strings.HasPrefix(err.Error(), "hide pattern ") {
			t.Errorf("CompileMountRules(hide %q) = %v, want an error naming the list", p, err)
		}
	}
	for _, p := range []string{"secrets/", ".env", "a/b/", "**/*.pem", "build/**", `a\*b`, "[ab]"} {
		if _, err := CompileMount(p); err != nil {
			t.Errorf("CompileMount(%q) = %v", p, err)
		}
	}
}

// TestPathEmptySegmentRefused: "/a//b" is refused, as lang always did,
// and the engine compiles with the same function. It could never match:
// a request path holding "//" is refused under path rules
// (CheckRequestPath), since servers may merge the slashes.
func TestPathEmptySegmentRefused(t *testing.T) {
	if _, err := CompilePath("/a//b"); err == nil || !strings.Contains(err.Error(), "empty segment") {
		t.Errorf(`CompilePath("/a//b") = %v`, err)
	}
	if CheckRequestPath("/a//b") == nil {
		t.Error(`CheckRequestPath("/a//b") accepted a path no pattern may match`)
	}
	if _, err := CompilePath("/a/b/"); err != nil {
		t.Errorf("a trailing empty segment: %v", err)
	}
}

// TestRefPatternIsGitsRefName: the engine once checked only the "refs/"
// prefix of a git_push pattern, accepting what lang refused. Both compile
// with CompileRef now; ref names in a push that git itself refuses never
// reach the matcher (package gitpush refuses them).
func TestRefPatternIsGitsRefName(t *testing.T) {
	for _, p := range []string{"refs/heads/a..b", "refs/heads", "refs/heads/[ab]", "refs/heads/x.lock", "refs/heads/a b"} {
		if _, err := CompileRef(p); err == nil {
			t.Errorf("CompileRef(%q) accepted", p)
		}
	}
}

// TestMountClassify: the most restrictive rule wins, a rule on a
// directory covers what is under it, a name without a slash matches at
// any depth and a trailing "/**" matches inside only.
func TestMountClassify(t *testing.T) {
	r, err := CompileMountRules([]string{".env", "secrets/"}, []string{"docs", "build/**"}, []string{"node_modules", "docs/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]Class{
		"":                     Plain,
		"src/main.go":          Plain,
		".env":                 Hidden,
		"a/b/.env":             Hidden,
		"secrets":              Hidden,
		"x/secrets/key":        Hidden,
		"docs/a.md":            ReadOnlyPath,
		"docs/tmp/x":           ReadOnlyPath, // read-only beats tmpfs
		"build":                Plain,
		"build/out":            ReadOnlyPath,
		"node_modules/x/y":     TmpfsPath,
		"pkg/node_modules/z":   TmpfsPath,
		"node_modulesx/a":      Plain,
		"docs/node_modules/.x": ReadOnlyPath,
	} {
		if got := r.Classify(rel); got != want {
			t.Errorf("Classify(%q) = %v, want %v", rel, got, want)
		}
	}
	if got := r.HiddenBy("a/.env"); len(got) != 1 || got[0] != ".env" {
		t.Errorf("HiddenBy(a/.env) = %q", got)
	}
	if got := r.TmpfsLiterals(); strings.Join(got, ",") != "node_modules,docs/tmp" {
		t.Errorf("TmpfsLiterals() = %q", got)
	}
}
