package archivetest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// RequireAptEnv names the environment variable that turns a missing
// apt-get from a skip into a failure (for CI machines that must run the
// real-package tests).
const RequireAptEnv = "SBX_TEST_REQUIRE_APT"

// CacheDir returns the directory real packages are cached in,
// os.UserCacheDir()/sbx-test/debs, creating it.
func CacheDir(t testing.TB) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("user cache directory: %v", err)
	}
	dir := filepath.Join(base, "sbx-test", "debs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Cached returns the newest .deb of package name in the cache, or "".
func Cached(t testing.TB, name string) string {
	t.Helper()
	debs, err := filepath.Glob(filepath.Join(CacheDir(t), name+"_*.deb"))
	if err != nil {
		t.Fatal(err)
	}
	return Newest(t, debs)
}

// Newest returns the most recently modified of paths, or "" for none.
func Newest(t testing.TB, paths []string) string {
	t.Helper()
	if len(paths) == 0 {
		return ""
	}
	type file struct {
		path string
		mod  int64
	}
	var fs []file
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, file{p, fi.ModTime().UnixNano()})
	}
	sort.Slice(fs, func(i, j int) bool {
		if fs[i].mod != fs[j].mod {
			return fs[i].mod > fs[j].mod
		}
		return fs[i].path > fs[j].path
	})
	return fs[0].path
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
// `apt-get download` when no copy of the package is there yet. The
// download goes to a fresh directory and is renamed into the cache, so
// concurrent tests never see a partial file. Without apt-get the test is
// skipped (see RequireApt); a failing download fails it.
func AptDownload(t testing.TB, name, version string) string {
	t.Helper()
	glob := name + "_*.deb"
	if version != "" {
		glob = name + "_" + debFileVersion(version) + "_*.deb"
	}
	dir := CacheDir(t)
	debs, err := filepath.Glob(filepath.Join(dir, glob))
	if err != nil {
		t.Fatal(err)
	}
	if p := Newest(t, debs); p != "" {
		return p
	}
	RequireApt(t)
	tmp, err := os.MkdirTemp(dir, ".download-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	spec := name
	if version != "" {
		spec += "=" + version
	}
	cmd := exec.Command("apt-get", "download", "-q", "-o", "Debug::NoLocking=1", spec)
	cmd.Dir = tmp
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("apt-get download %s: %v\n%s", spec, err, out.String())
	}
	got, err := filepath.Glob(filepath.Join(tmp, name+"_*.deb"))
	if err != nil || len(got) != 1 {
		t.Fatalf("apt-get download %s wrote %v, want one %s: %v\n%s", spec, got, glob, err, out.String())
	}
	dst := filepath.Join(dir, filepath.Base(got[0]))
	if err := os.Rename(got[0], dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// debFileVersion spells a Debian version as apt-get names files: the
// epoch's colon becomes %3a.
func debFileVersion(v string) string {
	return strings.ReplaceAll(v, ":", "%3a")
}
