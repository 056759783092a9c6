package operation

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

// gitRepo makes an empty repository for a test and returns it with the
// environment its git commands run with and a runner.
func gitRepo(t *testing.T) (repo string, env []string, run func(stdin string, args ...string) string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	repo = t.TempDir()
	env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	run = func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = env
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	run("", "init", "-q")
	return repo, env, run
}

// TestExtractTreeHostileNames: a committed tree may hold entries git
// itself would never check out — "..", a subtree named "..", names with
// a leading dash — and a symbolic link beside a file written through
// it. The extraction writes only the local regular files, each inside
// the destination.
func TestExtractTreeHostileNames(t *testing.T) {
	repo, env, run := gitRepo(t)
	blob := run("escaped\n", "hash-object", "-w", "--stdin")
	link := run("/tmp", "hash-object", "-w", "--stdin")
	up := run("100644 blob "+blob+"\tpwned\n", "mktree")
	tree := run(strings.Join([]string{
		"100644 blob " + blob + "\t..",
		"040000 tree " + up + "\t..",
		"120000 blob " + link + "\tlink",
		"100644 blob " + blob + "\t-ok.hcl",
		"100755 blob " + blob + "\tsbx.hcl",
	}, "\n")+"\n", "mktree")
	commit := run("", "commit-tree", "-m", "hostile", tree)

	base := t.TempDir()
	dst := filepath.Join(base, "a", "dst")
	must(t, os.MkdirAll(dst, 0o755))
	if err := extractTree(t.Context(), env, repo, commit, dst); err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(base, p)
			got = append(got, rel)
		}
		return nil
	})
	want := []string{filepath.Join("a", "dst", "-ok.hcl"), filepath.Join("a", "dst", "sbx.hcl")}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("files written: %q, want %q", got, want)
	}
}

// TestExtractTreeLargeBlob: a revision of an attacker's checkout may
// hold a blob of any size (zeros compress to almost nothing in git).
// The extraction streams it to its file: what it allocates does not
// grow with the blob.
func TestExtractTreeLargeBlob(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 64 MiB blob")
	}
	repo, env, run := gitRepo(t)
	const size = 64 << 20
	big := filepath.Join(t.TempDir(), "big")
	f, err := os.Create(big)
	must(t, err)
	must(t, f.Truncate(size))
	must(t, f.Close())
	blob := run("", "hash-object", "-w", big)
	tree := run("100644 blob "+blob+"\tbig.bin\n", "mktree")
	commit := run("", "commit-tree", "-m", "big", tree)

	dst := t.TempDir()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := extractTree(t.Context(), env, repo, commit, dst); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if fi, err := os.Stat(filepath.Join(dst, "big.bin")); err != nil || fi.Size() != size {
		t.Fatalf("big.bin: %v, %v", fi, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/4 {
		t.Errorf("extracting a %d-byte blob allocated %d bytes: it is held in memory", size, alloc)
	}
	// A failure midway (the file exists) ends git, which was blocked
	// writing the rest, and is the error.
	if err := extractTree(t.Context(), env, repo, commit, dst); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("extracting over an existing file: %v", err)
	}
}
