package apttest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/apt/apttest"
)

// A cached package is served without apt (the PATH here has none), the
// newest of several; one that is not cached is ErrNoApt.
func TestDownloadFromCache(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	dir, err := apttest.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "tool_1%3a1.0-1_amd64.deb")
	newer := filepath.Join(dir, "tool_1%3a1.1-1_amd64.deb")
	for i, p := range []string{old, newer} {
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
		mod := time.Unix(1700000000+int64(i), 0)
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for version, want := range map[string]string{"": newer, "1:1.0-1": old} {
		got, err := apttest.Download(ctx, "tool", version)
		if err != nil || got != want {
			t.Errorf("Download(tool, %q) = %s, %v; want %s", version, got, err, want)
		}
	}
	into := t.TempDir()
	got, err := apttest.Cache{}.Download(ctx, "tool", "1:1.0-1", into)
	if b, _ := os.ReadFile(got); err != nil || string(b) != old {
		t.Errorf("Cache.Download = %s (%q), %v", got, b, err)
	}
	if _, err := apttest.Download(ctx, "tool", "2.0"); !errors.Is(err, apttest.ErrNoApt) {
		t.Errorf("an uncached version without apt: err = %v, want ErrNoApt", err)
	}
}
