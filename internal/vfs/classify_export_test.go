package vfs

import (
	"slices"
	"testing"

	"github.com/sbx-dev/sbx/policy"
)

// TestHiddenBy checks that HiddenBy names every hide pattern matching a
// path itself, in the mount's order, and none that only match an
// ancestor (Classify covers those).
func TestHiddenBy(t *testing.T) {
	r, err := CompileRules(policy.Mount{Hide: []string{".env", ".env*", "**/*.pem", "secrets", "build/**"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rel  string
		want []string
	}{
		{".env", []string{".env", ".env*"}},
		{"app/.env.local", []string{".env*"}},
		{"certs/a.pem", []string{"**/*.pem"}},
		{"secrets", []string{"secrets"}},
		{"secrets/a.txt", nil}, // hidden through its parent only
		{"build", nil},         // "build/**" is what is inside
		{"build/out", []string{"build/**"}},
		{"src/main.go", nil},
		{"", nil},
	} {
		if got := r.HiddenBy(c.rel); !slices.Equal(got, c.want) {
			t.Errorf("HiddenBy(%q) = %q, want %q", c.rel, got, c.want)
		}
		if len(c.want) > 0 && r.Classify(c.rel) != Hidden {
			t.Errorf("Classify(%q) = %v, but HiddenBy names %q", c.rel, r.Classify(c.rel), c.want)
		}
	}
}
