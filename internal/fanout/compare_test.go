package fanout

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/policy"
)

// changeLines renders changes one a line: "change type path".
func changeLines(chs []Change) string {
	var b strings.Builder
	for _, c := range chs {
		fmt.Fprintf(&b, "%s %s %s\n", c.Change, c.Type, c.Path)
	}
	return b.String()
}

// snapshot copies src as an eval does: a base, then a run's copy of it.
func snapshot(t *testing.T, src string) (base, run string) {
	t.Helper()
	dir := t.TempDir()
	base, run = filepath.Join(dir, "base"), filepath.Join(dir, "run")
	if _, err := CopyTree(context.Background(), src, base, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := CopyTree(context.Background(), base, run, nil, nil); err != nil {
		t.Fatal(err)
	}
	return base, run
}

// TestCompare plays a run that changes its copy in every way and checks
// the list of changes, the tarball and the diff.
func TestCompare(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{
		"same.txt":       "unchanged\n",
		"edit.txt":       "one\ntwo\nthree\n",
		"samesize.txt":   "abcd\n",
		"gone.txt":       "bye\n",
		"olddir/a.txt":   "a\n",
		"olddir/sub/b":   "b\n",
		"becomesdir":     "file\n",
		"chmod.sh":       "#!/bin/sh\n",
		"bin.dat":        "\x00\x01\x02",
		"keep/inner.txt": "kept\n",
	})
	os.Symlink("same.txt", filepath.Join(src, "link"))
	base, run := snapshot(t, src)

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(run, "edit.txt"), []byte("one\nTWO\nthree\n"), 0o644))
	must(os.WriteFile(filepath.Join(run, "samesize.txt"), []byte("abce\n"), 0o644))
	must(os.Remove(filepath.Join(run, "gone.txt")))
	must(os.RemoveAll(filepath.Join(run, "olddir")))
	must(os.Remove(filepath.Join(run, "becomesdir")))
	must(os.MkdirAll(filepath.Join(run, "becomesdir/x"), 0o755))
	must(os.WriteFile(filepath.Join(run, "becomesdir/x/y.txt"), []byte("y\n"), 0o644))
	must(os.Chmod(filepath.Join(run, "chmod.sh"), 0o755))
	must(os.WriteFile(filepath.Join(run, "bin.dat"), []byte("\x00\x01\x03"), 0o644))
	must(os.WriteFile(filepath.Join(run, "new.txt"), []byte("new\n"), 0o600))
	must(os.Remove(filepath.Join(run, "link")))
	must(os.Symlink("edit.txt", filepath.Join(run, "link")))
	// A directory the guest left unreadable is still compared.
	must(os.MkdirAll(filepath.Join(run, "locked"), 0o755))
	must(os.WriteFile(filepath.Join(run, "locked/in.txt"), []byte("in\n"), 0o644))
	must(os.Chmod(filepath.Join(run, "locked"), 0))

	chs, err := Compare(base, run, "/workspace", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `modified dir /workspace/becomesdir
added dir /workspace/becomesdir/x
added file /workspace/becomesdir/x/y.txt
modified file /workspace/bin.dat
modified file /workspace/chmod.sh
modified file /workspace/edit.txt
deleted file /workspace/gone.txt
modified symlink /workspace/link
added dir /workspace/locked
added file /workspace/locked/in.txt
added file /workspace/new.txt
deleted dir /workspace/olddir
deleted file /workspace/olddir/a.txt
deleted dir /workspace/olddir/sub
deleted file /workspace/olddir/sub/b
modified file /workspace/samesize.txt
`
	if got := changeLines(chs); got != want {
		t.Errorf("changes:\n%s\nwant:\n%s", got, want)
	}

	var tb bytes.Buffer
	if err := writeTar(&tb, []mountTrees{{base: base, run: run, changes: chs}}); err != nil {
		t.Fatal(err)
	}
	entries := map[string]string{}
	tr := tar.NewReader(&tb)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		entries[h.Name] = fmt.Sprintf("%c %o %s%s", h.Typeflag, h.Mode&0o7777, data, h.Linkname)
	}
	wantTar := map[string]string{
		"workspace/bin.dat":            "0 644 \x00\x01\x03",
		"workspace/becomesdir/":        "5 755 ",
		"workspace/becomesdir/x/":      "5 755 ",
		"workspace/becomesdir/x/y.txt": "0 644 y\n",
		"workspace/chmod.sh":           "0 755 #!/bin/sh\n",
		"workspace/edit.txt":           "0 644 one\nTWO\nthree\n",
		"workspace/link":               "2 777 edit.txt",
		"workspace/locked/":            "5 700 ",
		"workspace/locked/in.txt":      "0 644 in\n",
		"workspace/new.txt":            "0 600 new\n",
		"workspace/samesize.txt":       "0 644 abce\n",
	}
	if fmt.Sprint(entries) != fmt.Sprint(wantTar) {
		t.Errorf("tar entries:\n%q\nwant\n%q", entries, wantTar)
	}

	var db bytes.Buffer
	if err := writeDiff(&db, []mountTrees{{base: base, run: run, changes: chs}}); err != nil {
		t.Fatal(err)
	}
	diff := db.String()
	for _, want := range []string{
		"diff --git a/workspace/edit.txt b/workspace/edit.txt\n--- a/workspace/edit.txt\n+++ b/workspace/edit.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n",
		"diff --git a/workspace/gone.txt b/workspace/gone.txt\ndeleted file mode 100644\n--- a/workspace/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n",
		"diff --git a/workspace/new.txt b/workspace/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/workspace/new.txt\n@@ -0,0 +1 @@\n+new\n",
		"diff --git a/workspace/chmod.sh b/workspace/chmod.sh\nold mode 100644\nnew mode 100755\n",
		"Binary files a/workspace/bin.dat and b/workspace/bin.dat differ\n",
		"-file\n",
	} {
		if !strings.Contains(diff, want) {
			t.Errorf("the diff lacks\n%s\nit is:\n%s", want, diff)
		}
	}
	if strings.Contains(diff, "link") {
		t.Errorf("the diff shows a link:\n%s", diff)
	}
}

// TestCompareNeverFollowsGuestLinks plays a guest that replaces a file
// and a directory of its copy with links to host files outside it: the
// changes say links, and neither the tarball nor the diff holds a byte
// of what they point at.
func TestCompareNeverFollowsGuestLinks(t *testing.T) {
	const secret = "host-secret-6f1d"
	outsideDir := t.TempDir()
	outside := filepath.Join(outsideDir, "id_rsa")
	if err := os.WriteFile(outside, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	writeTree(t, src, map[string]string{"notes.txt": "notes\n", "src/main.go": "package main\n"})
	base, run := snapshot(t, src)
	os.Remove(filepath.Join(run, "notes.txt"))
	os.Symlink(outside, filepath.Join(run, "notes.txt"))
	os.RemoveAll(filepath.Join(run, "src"))
	os.Symlink(outsideDir, filepath.Join(run, "src"))
	os.Symlink(outside, filepath.Join(run, "added-link"))

	chs, err := Compare(base, run, "/w", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `added symlink /w/added-link
modified symlink /w/notes.txt
modified symlink /w/src
deleted file /w/src/main.go
`
	if got := changeLines(chs); got != want {
		t.Errorf("changes:\n%s\nwant:\n%s", got, want)
	}
	var out bytes.Buffer
	ms := []mountTrees{{base: base, run: run, changes: chs}}
	if err := writeTar(&out, ms); err != nil {
		t.Fatal(err)
	}
	if err := writeDiff(&out, ms); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), secret) {
		t.Errorf("the results (%d bytes) hold the content of a file outside the copy", out.Len())
	}
}

// TestCompareSkipsRules checks that paths the mount hides or keeps in
// memory are not reported, even if something put them in the copy.
func TestCompareSkipsRules(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "a\n"})
	base, run := snapshot(t, src)
	writeTree(t, run, map[string]string{".env": "x", "node_modules/m.js": "m", "b.txt": "b"})
	chs, err := Compare(base, run, "/w", rulesOf(t, []string{".env"}, nil, []string{"node_modules"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := changeLines(chs); got != "added file /w/b.txt\n" {
		t.Errorf("changes:\n%s", got)
	}
}

// TestExecuteRefuses checks the errors given before anything starts.
func TestExecuteRefuses(t *testing.T) {
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), nil, 0o644)
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	start := func(context.Context, int, map[string]string, string) (Sandbox, error) {
		t.Error("a sandbox was started")
		return nil, fmt.Errorf("no")
	}
	cmd := guestconn.Cmd{Args: []string{"true"}}
	failedCopy := filepath.Join(t.TempDir(), "r")
	emptyBefore := t.TempDir()
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Runs: 0, Parallel: 1, Cmd: cmd, ResultsDir: t.TempDir(), Start: start}, "runs must be at least 1, not 0"},
		{Options{Runs: 2, Parallel: 0, Cmd: cmd, ResultsDir: t.TempDir(), Start: start}, "at once must be at least 1, not 0"},
		{Options{Runs: 1, Parallel: 1, ResultsDir: t.TempDir(), Start: start}, "no command"},
		{Options{Runs: 1, Parallel: 1, Cmd: cmd, Start: start}, "no results directory"},
		{Options{Runs: 1, Parallel: 1, Cmd: guestconn.Cmd{Args: []string{"true"}, Dir: "work"}, ResultsDir: t.TempDir(), Start: start}, `working directory "work" is not an absolute path`},
		{Options{Runs: 1, Parallel: 1, Cmd: guestconn.Cmd{Args: []string{"true"}, User: "root:"}, ResultsDir: t.TempDir(), Start: start}, `user "root:": want NAME, UID`},
		{Options{Runs: 1, Parallel: 1, Cmd: cmd, ResultsDir: full, Start: start}, "is not empty"},
		{Options{Runs: 1, Parallel: 1, Cmd: cmd, ResultsDir: file, Start: start}, "not a directory"},
		{Options{Runs: 1, Parallel: 1, Cmd: cmd, ResultsDir: failedCopy, Start: start,
			Mounts: []Mount{{Policy: policy.Mount{Guest: "/w", Access: policy.ReadWrite}, HostDir: filepath.Join(full, "missing")}}}, "copying mount /w"},
		{Options{Runs: 1, Parallel: 1, Cmd: cmd, ResultsDir: emptyBefore, Start: start,
			Mounts: []Mount{{Policy: policy.Mount{Guest: "/w", Access: policy.ReadWrite}, HostDir: filepath.Join(full, "missing")}}}, "copying mount /w"},
	} {
		_, err := Execute(context.Background(), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.opts, err, tc.want)
		}
	}
	// A failure before the first run leaves the results directory as
	// it was.
	if _, err := os.Lstat(failedCopy); err == nil {
		t.Errorf("%s was left behind", failedCopy)
	}
	if ents, err := os.ReadDir(emptyBefore); err != nil || len(ents) != 0 {
		t.Errorf("%s holds %v, %v", emptyBefore, ents, err)
	}
}

// TestIndexAppend checks that each line is on disk when Append returns
// and reads back.
func TestIndexAppend(t *testing.T) {
	dir := t.TempDir()
	x, err := CreateIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for i := range 3 {
		if err := x.Append(Run{Run: i, Status: StatusExited, ExitCode: i, Changes: []Change{{Path: "/w/a", Change: Added, Type: TypeFile}}}); err != nil {
			t.Fatal(err)
		}
		runs, err := ReadIndex(dir)
		if err != nil || len(runs) != i+1 || runs[i].ExitCode != i || runs[i].Changes[0].Path != "/w/a" {
			t.Fatalf("after %d appends: %+v, %v", i+1, runs, err)
		}
	}
	if _, err := CreateIndex(dir); err == nil {
		t.Error("a second index over the first was created")
	}
}
