package mirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/lang"
)

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func TestFind(t *testing.T) {
	ctx := context.Background()
	body := []byte("release tarball")
	sha := sum(body)
	const u = "https://releases.invalid/download/v1/tool_linux_amd64.tar.gz"
	dir := t.TempDir()

	// An empty directory, and no directory, find nothing.
	for _, d := range []string{"", dir} {
		if f, err := Find(ctx, d, u, sha); err != nil || f.Path != "" || len(f.Rejected) != 0 {
			t.Errorf("Find(%q) = %+v, %v; want nothing", d, f, err)
		}
	}
	if _, err := Find(ctx, filepath.Join(dir, "missing"), u, sha); err == nil || !strings.Contains(err.Error(), EnvVar) {
		t.Errorf("a missing mirror directory: %v", err)
	}

	// Named as the URL names it, with other content: rejected, saying
	// what it holds.
	named := filepath.Join(dir, "tool_linux_amd64.tar.gz")
	if err := os.WriteFile(named, []byte("an older release"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Find(ctx, dir, u, sha)
	if err != nil || f.Path != "" || len(f.Rejected) != 1 || !strings.Contains(f.Rejected[0], sum([]byte("an older release"))) {
		t.Errorf("a file of the URL's name with other content: %+v, %v", f, err)
	}
	// With the content: found.
	if err := os.WriteFile(named, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := Find(ctx, dir, u, sha); err != nil || f.Path != named {
		t.Errorf("a file of the URL's name: %+v, %v", f, err)
	}
	// Named by its sha256, whatever the URL: found first.
	byHash := filepath.Join(dir, sha)
	if err := os.WriteFile(byHash, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := Find(ctx, dir, "https://elsewhere.invalid/other.bin", sha); err != nil || f.Path != byHash {
		t.Errorf("a file named by its sha256: %+v, %v", f, err)
	}
	// No sha256 to check against: nothing is taken on trust.
	if f, err := Find(ctx, dir, u, ""); err != nil || f.Path != "" {
		t.Errorf("without a sha256: %+v, %v", f, err)
	}

	// A symbolic link out of the directory is not followed.
	outside := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(outside, body, 0o644); err != nil {
		t.Fatal(err)
	}
	linked := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(linked, "tool_linux_amd64.tar.gz")); err != nil {
		t.Fatal(err)
	}
	if f, err := Find(ctx, linked, u, sha); err == nil && f.Path != "" {
		t.Errorf("a link out of the mirror directory was followed: %+v", f)
	}
}

func TestHint(t *testing.T) {
	src := &lang.Source{Kind: lang.SourceURL, Raw: "https://h.invalid/t.tgz", Ref: "https://h.invalid/t.tgz", Vars: []string{"tool_url"}}
	sha := strings.Repeat("a", 64)
	for _, c := range []struct {
		name  string
		sha   string
		dir   string
		found Found
		want  []string
	}{
		{"no mirror", sha, "", Found{}, []string{"var.tool_url", "-var tool_url=https://", "SBX_VAR_tool_url", EnvVar, sha}},
		{"mirror without it", sha, "/m", Found{}, []string{"var.tool_url", EnvVar + " (/m) holds no copy", sha}},
		{"mirror with another", sha, "/m", Found{Rejected: []string{"/m/t.tgz has sha256 bbb"}}, []string{"/m/t.tgz has sha256 bbb"}},
		{"no sha256", "", "", Found{}, []string{"var.tool_url", "declare sha256"}},
	} {
		got := Hint(src, c.sha, c.dir, c.found)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: hint %q lacks %q", c.name, got, w)
			}
		}
	}
	literal := &lang.Source{Kind: lang.SourceURL, Raw: "https://h.invalid/t.tgz"}
	if got := Hint(literal, sha, "", Found{}); strings.Contains(got, "var.") {
		t.Errorf("a literal source's hint names a variable: %q", got)
	}
}
