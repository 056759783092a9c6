package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(p, []byte("new"), 0o640); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "new" {
		t.Fatalf("content = %q, %v; want new", b, err)
	}
	info, _ := os.Stat(p)
	if info.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, want 0640", info.Mode().Perm())
	}
	assertOnly(t, dir, "f")
}

func TestFailedWriteLeavesOldFileAndNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	err := Write(p, 0o644, func(f *os.File) error {
		f.Write([]byte("half"))
		return boom
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "writing "+p) {
		t.Fatalf("err = %v, want wrapped %v naming %s", err, boom, p)
	}
	b, _ := os.ReadFile(p)
	if string(b) != "old" {
		t.Errorf("content = %q, want the old content", b)
	}
	assertOnly(t, dir, "f")
}

func TestRenameOntoDirectoryFails(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "d")
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(p, []byte("x"), 0o644); err == nil {
		t.Fatal("writing over a directory succeeded")
	}
	assertOnly(t, dir, "d")
}

func TestMissingDirectory(t *testing.T) {
	p := filepath.Join(t.TempDir(), "no", "such", "f")
	if err := WriteBytes(p, nil, 0o644); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("err = %v, want an error naming %s", err, p)
	}
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("directory holds %v, want %v", got, names)
	}
}

func TestWriteInReplacesLinkNotTarget(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, "f")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := WriteIn(root, "f", 0o600, func(f *os.File) error { _, err := f.Write([]byte("new")); return err }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the link's target was written: %q", b)
	}
	fi, err := os.Lstat(filepath.Join(dir, "f"))
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("f = %v, %v; want a regular file of mode 0600", fi, err)
	}
	assertOnly(t, dir, "f")

	for _, bad := range []string{"", ".", "..", "a/b"} {
		if err := WriteIn(root, bad, 0o600, func(*os.File) error { return nil }); err == nil {
			t.Errorf("WriteIn(%q) succeeded", bad)
		}
	}
	boom := errors.New("disk full")
	if err := WriteIn(root, "g", 0o600, func(*os.File) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("err = %v, want %v", err, boom)
	}
	assertOnly(t, dir, "f")
}

// A link planted at the target's name (sbx.lock.hcl in a checkout) is
// replaced, not written through.
func TestWriteReplacesLinkNotTarget(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "f")
	if err := os.Symlink(victim, p); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(p, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the link's target was written: %q", b)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("f = %v, %v; want a regular file", fi, err)
	}
}
