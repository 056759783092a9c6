//go:build linux

package vfs

import (
	"testing"

	"github.com/sbx-dev/sbx/policy"
	"github.com/sbx-dev/sbx/policy/match"
)

func TestClassify(t *testing.T) {
	r, err := CompileRules(workspace())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want Class
	}{
		{"", Plain},
		{".env", Hidden},
		{"sub/.env", Hidden}, // no slash: any depth, as in gitignore
		{".env.production", Hidden},
		{".envrc", Plain},
		{".git/config", Hidden},
		{".git/config/x", Hidden},  // under a hidden path
		{"sub/.git/config", Plain}, // anchored
		{".git/HEAD", Plain},
		{"key.pem", Hidden},
		{"a/b/c/key.pem", Hidden},
		{"a/b/c/key.pem.txt", Plain},
		{"secrets", Hidden}, // a trailing slash does not limit to directories
		{"secrets/db.txt", Hidden},
		{"x/secrets", Hidden},
		{".git/hooks", ReadOnlyPath},
		{".git/hooks/pre-commit", ReadOnlyPath},
		{"vendor/lib.go", ReadOnlyPath},
		{"node_modules", TmpfsPath},
		{"node_modules/a/b", TmpfsPath},
		{"pkg/node_modules/a", TmpfsPath},
		{"node_modules/x.pem", Hidden}, // hide wins over tmpfs
		{"build/cache/x", TmpfsPath},
		{"build/out.txt", Plain},
		{"src/main.go", Plain},
	} {
		if got := r.Classify(c.path); got != c.want {
			t.Errorf("Classify(%q) = %v, want %v", c.path, got, c.want)
		}
	}
}

func TestPatternForms(t *testing.T) {
	for _, c := range []struct {
		pattern, path string
		want          bool
	}{
		{"**/*.pem", "a.pem", true},
		{"**/*.pem", "x/y/a.pem", true},
		{"build/**", "build/a/b", true},
		{"build/**", "build", false},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"docs/*.md", "docs/a.md", true},
		{"docs/*.md", "docs/x/a.md", false},
		{"docs/*.md", "x/docs/a.md", false},
		{"?.txt", "a.txt", true},
		{"[ab].txt", "c.txt", false},
		{"id_*", "home/.ssh/id_ed25519", true},
	} {
		p, err := match.CompileMount(c.pattern)
		if err != nil {
			t.Fatalf("%q: %v", c.pattern, err)
		}
		if got := p.MatchNames(split(c.path)); got != c.want {
			t.Errorf("%q on %q = %v, want %v", c.pattern, c.path, got, c.want)
		}
	}
	for _, bad := range []string{"", "/etc", "!keep", "a/../b", "./a", "a//b", "[", "a\x00b"} {
		if _, err := match.CompileMount(bad); err == nil {
			t.Errorf("pattern %q compiled; want an error", bad)
		}
	}
}

func TestWritable(t *testing.T) {
	m := workspace()
	m.Access = policy.ReadOnly
	r, err := CompileRules(m)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		"src/main.go":              false, // ro mount
		"node_modules/x":           true,  // scratch never touches the host
		".git/hooks/pre-commit":    false,
		".env":                     false,
		"build/cache/deep/file.o":  true,
		"build/cachex/deep/file.o": false,
	} {
		if got := r.place(path).writable; got != want {
			t.Errorf("writable(%q) in an ro mount = %v, want %v", path, got, want)
		}
	}
}
