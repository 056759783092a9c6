package operation

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteFileStaysInRoot: a name that climbs out, an absolute name, and
// a name through a symbolic link that leads out of the destination (a
// link planted before, or made by an earlier entry) all fail, and nothing
// appears outside the destination.
func TestWriteFileStaysInRoot(t *testing.T) {
	base := t.TempDir()
	dst := filepath.Join(base, "dst")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{dst, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(dst, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../outside/new", filepath.Join(dst, "file-link")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()

	for _, name := range []string{
		"../outside/up",
		"a/../../outside/up2",
		filepath.Join(outside, "abs"),
		"link/through",
		"link/sub/deeper",
		"file-link",
	} {
		if err := writeFile(root, name, strings.NewReader("x"), 1); err == nil {
			t.Errorf("writeFile(%q) succeeded", name)
		}
	}
	entries, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("%s was written outside the destination", filepath.Join(outside, e.Name()))
	}

	// Ordinary names still work, directories made on the way.
	if err := writeFile(root, "a/b/c.hcl", strings.NewReader("content"), 7); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "a", "b", "c.hcl")); err != nil || string(b) != "content" {
		t.Errorf("a/b/c.hcl = %q, %v", b, err)
	}
	// An existing file is not overwritten.
	if err := writeFile(root, "a/b/c.hcl", strings.NewReader("again!!"), 7); !errors.Is(err, os.ErrExist) {
		t.Errorf("writing a/b/c.hcl twice: %v, want it to exist", err)
	}
}

// TestAgainstDirRevision reads a committed configuration out of git with
// AgainstDir: its regular files as committed, the link it holds skipped.
func TestAgainstDirRevision(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	repo := t.TempDir()
	env := append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q")
	must(t, os.MkdirAll(filepath.Join(repo, "spec", "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(repo, "spec", "sbx.hcl"), []byte("# old\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(repo, "spec", "sub", "more.hcl"), []byte("# more\n"), 0o644))
	must(t, os.Symlink("/etc/passwd", filepath.Join(repo, "spec", "passwd")))
	run("add", "-A")
	run("commit", "-qm", "one")
	must(t, os.WriteFile(filepath.Join(repo, "spec", "sbx.hcl"), []byte("# new\n"), 0o644))

	other, label, cleanup, err := AgainstDir(context.Background(), env, filepath.Join(repo, "spec"), "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if label != "HEAD" {
		t.Errorf("label %q", label)
	}
	if b, err := os.ReadFile(filepath.Join(other, "sbx.hcl")); err != nil || string(b) != "# old\n" {
		t.Errorf("sbx.hcl at HEAD = %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(other, "sub", "more.hcl")); err != nil || string(b) != "# more\n" {
		t.Errorf("sub/more.hcl at HEAD = %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(other, "passwd")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the committed symbolic link was extracted: %v", err)
	}
	cleanup()
	if _, err := os.Stat(other); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cleanup left %s: %v", other, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
