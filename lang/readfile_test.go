package lang_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sbx-dev/sbx/lang"
)

// TestReadFileConfined checks the reader other checkout files go through
// (a project .npmrc, a file show is given): a regular file or a link to
// one inside the directory is read; a missing file is fs.ErrNotExist; a
// named pipe, a link to a device or out of the directory, a dangling link
// and a file over the cap are errors naming the file and quoting no link
// target.
func TestReadFileConfined(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret-target")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "real"), []byte("registry=x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"inside": "real", "zero": "/dev/zero", "out": outside, "dangling": "nowhere"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"real", "inside"} {
		if b, err := lang.ReadFile(dir, name); err != nil || string(b) != "registry=x\n" {
			t.Errorf("ReadFile(%s) = %q, %v", name, b, err)
		}
	}
	if _, err := lang.ReadFile(dir, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing): err = %v, want fs.ErrNotExist", err)
	}
	for name, want := range map[string]string{"pipe": "named pipe", "zero": "outside", "out": "outside", "dangling": "symbolic link", "../x": "inside"} {
		_, err := lang.ReadFile(dir, name)
		if err == nil || !strings.Contains(err.Error(), want) || errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadFile(%s): err = %v, want an error saying %q", name, err, want)
			continue
		}
		if strings.Contains(err.Error(), "secret-target") {
			t.Errorf("ReadFile(%s) quotes the link's target: %v", name, err)
		}
	}
	if _, err := lang.ReadFileLimit(dir, "big", 99); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("ReadFileLimit over the cap: err = %v", err)
	}
	if b, err := lang.ReadFileLimit(dir, "big", 100); err != nil || len(b) != 100 {
		t.Errorf("ReadFileLimit at the cap: %d bytes, %v", len(b), err)
	}
}
