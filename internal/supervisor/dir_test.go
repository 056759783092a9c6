package supervisor

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestRuntimeBase(t *testing.T) {
	tmpBase := filepath.Join("/t", "sbx-"+strconv.Itoa(os.Getuid()))
	long := "/home/" + strings.Repeat("u", 40)
	for _, tc := range []struct {
		environ []string
		want    string
	}{
		{[]string{"SBX_RUNTIME_DIR=/r", "XDG_RUNTIME_DIR=/x", "HOME=/h"}, "/r"},
		{[]string{"XDG_RUNTIME_DIR=/run/user/7", "HOME=/h"}, "/run/user/7/sbx"},
		{[]string{"XDG_STATE_HOME=/s", "HOME=/h", "TMPDIR=/t"}, "/s/sbx/run"},
		{[]string{"HOME=/home/u", "TMPDIR=/t"}, "/home/u/.local/state/sbx/run"},
		{[]string{"XDG_STATE_HOME=relative", "HOME=/home/u"}, "/home/u/.local/state/sbx/run"},
		// Too long for the sockets beneath: the temporary directory.
		{[]string{"HOME=" + long, "TMPDIR=/t"}, tmpBase},
		{[]string{"HOME=relative", "TMPDIR=/t"}, tmpBase},
		{[]string{"TMPDIR=/t"}, tmpBase},
	} {
		if got := RuntimeBase(tc.environ); got != tc.want {
			t.Errorf("RuntimeBase(%q) = %s, want %s", tc.environ, got, tc.want)
		}
	}
}

// TestSandboxDirMakesOwnDirectoriesPrivate: directories of this user's
// that others may use are made 0700; SandboxDir makes none.
func TestSandboxDirMakesOwnDirectoriesPrivate(t *testing.T) {
	base := filepath.Join(shortTempDir(t), "base")
	if err := os.Mkdir(base, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o777)
	dir, err := SandboxDir(base, t.TempDir(), "dev")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(base); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("mode of %s = %v, %v; want 0700", base, fi.Mode().Perm(), err)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("SandboxDir made %s (%v)", filepath.Dir(dir), err)
	}
	if err := secureDir(dir, 1, true); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(dir), dir} {
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s made as %v, %v; want a directory with mode 0700", p, fi.Mode(), err)
		}
	}
}

// TestSandboxDirRefusesSymlinks: a runtime base, or a directory in it,
// that is a symbolic link is refused, wherever it points.
func TestSandboxDirRefusesSymlinks(t *testing.T) {
	real := t.TempDir()
	base := filepath.Join(shortTempDir(t), "base")
	if err := os.Symlink(real, base); err != nil {
		t.Fatal(err)
	}
	var ue *UnsafeError
	if _, err := SandboxDir(base, t.TempDir(), "dev"); !errors.As(err, &ue) || ue.Path != base {
		t.Errorf("SandboxDir under a linked base = %v; want an UnsafeError for %s", err, base)
	}

	base = shortTempDir(t)
	configDir := t.TempDir()
	dir, err := SandboxDir(base, configDir, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Dir(dir)); err != nil {
		t.Fatal(err)
	}
	if _, err := SandboxDir(base, configDir, "dev"); !errors.As(err, &ue) || ue.Path != filepath.Dir(dir) {
		t.Errorf("SandboxDir with a linked configuration directory = %v; want an UnsafeError for %s", err, filepath.Dir(dir))
	}
}

// shortTempDir is a temporary directory short enough for socket paths
// beneath it, whatever the test's name.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbxd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
