package archivetest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/apt/apttest"
)

// RequireAptEnv names the environment variable that turns a missing
// apt-get from a skip into a failure (for CI machines that must run the
// real-package tests).
const RequireAptEnv = "SBX_TEST_REQUIRE_APT"

// CacheDir returns the directory real packages are cached in,
// os.UserCacheDir()/sbx-test/debs (apttest.CacheDir), creating it.
func CacheDir(t testing.TB) string {
	t.Helper()
	dir, err := apttest.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Cached returns the newest .deb of package name in the cache, or "".
func Cached(t testing.TB, name string) string {
	t.Helper()
	p, err := apttest.Cached(name, "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Newest returns the most recently modified of paths, or "" for none.
func Newest(t testing.TB, paths []string) string {
	t.Helper()
	return apttest.Newest(paths)
}

// RequireApt skips the test, saying so, when apt-get is not installed
// (and fails it instead when SBX_TEST_REQUIRE_APT is set).
func RequireApt(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("apt-get"); err != nil {
		msg := "apt-get is not installed: this test reads real Debian packages and cannot run here"
		if os.Getenv(RequireAptEnv) != "" {
			t.Fatalf("%s (%s is set)", msg, RequireAptEnv)
		}
		t.Skip("SKIPPED: " + msg)
	}
}

// AptDownload returns the path of package name (at version, or apt's
// candidate when version is "") in the cache, downloading it with
// `apt-get download` when no copy of the package is there yet
// (apttest.Download). Without apt-get the test is skipped (see
// RequireApt); a failing download fails it.
func AptDownload(t testing.TB, name, version string) string {
	t.Helper()
	p, err := apttest.Download(context.Background(), name, version)
	if errors.Is(err, apttest.ErrNoApt) {
		RequireApt(t)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}
