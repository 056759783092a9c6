package fanout

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/policy/match"
)

// rulesOf compiles the rules of a read-write mount.
func rulesOf(t *testing.T, hide, readonly, tmpfs []string) *match.MountRules {
	t.Helper()
	r, err := match.CompileMountRules(hide, readonly, tmpfs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// writeTree makes the files (path → content) under root; a path ending
// in "/" is a directory.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCopyTreeLeavesOutHidden checks what a workspace copy holds: every
// plain and read-only path with its mode and time, links as links (the
// one pointing at a secret outside is not followed), and none of the
// hidden paths, tmpfs paths, the excluded results directory, or special
// files.
func TestCopyTreeLeavesOutHidden(t *testing.T) {
	src := filepath.Join(t.TempDir(), "work")
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("outside-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeTree(t, src, map[string]string{
		"README.md":         "readme\n",
		".env":              "TOKEN=host-only\n",
		"keys/deploy.pem":   "-----BEGIN PRIVATE KEY-----\n",
		"src/main.go":       "package main\n",
		"src/deep/cert.pem": "-----BEGIN PRIVATE KEY-----\n",
		".git/config":       "[remote] url = https://x:secret@git.test\n",
		".git/HEAD":         "ref: refs/heads/main\n",
		"vendor/lib.go":     "package lib\n",
		"node_modules/x.js": "big\n",
		"results/old.txt":   "previous eval\n",
		"tool.sh":           "#!/bin/sh\n",
	})
	os.Chmod(filepath.Join(src, "tool.sh"), 0o750)
	os.Chmod(filepath.Join(src, "vendor"), 0o555)
	os.Symlink(outside, filepath.Join(src, "link-out"))
	os.Symlink("src/main.go", filepath.Join(src, "link-in"))
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(filepath.Join(src, "README.md"), old, old)

	rules := rulesOf(t, []string{".env", ".git/config", "**/*.pem"}, []string{"vendor"}, []string{"node_modules"})
	dst := filepath.Join(t.TempDir(), "copy")
	st, err := CopyTree(context.Background(), src, dst, rules, []string{filepath.Join(src, "results"), "/elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dst, p)
		got = append(got, rel)
		return nil
	})
	want := []string{".", ".git", ".git/HEAD", "README.md", "keys", "link-in", "link-out", "src", "src/deep", "src/main.go", "tool.sh", "vendor", "vendor/lib.go"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("copy holds\n%v\nwant\n%v", got, want)
	}
	for _, leak := range []string{".env", ".git/config", "keys/deploy.pem", "src/deep/cert.pem", "node_modules", "results", "fifo"} {
		if _, err := os.Lstat(filepath.Join(dst, leak)); err == nil {
			t.Errorf("%s was copied", leak)
		}
	}
	if st.Files != 5 || st.Symlinks != 2 || st.Skipped != 7 {
		t.Errorf("stats %+v", st)
	}
	checkMode := func(name string, want fs.FileMode) {
		t.Helper()
		info, err := os.Lstat(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode() != want {
			t.Errorf("%s: mode %v, want %v", name, info.Mode(), want)
		}
	}
	checkMode("tool.sh", 0o750)
	checkMode("vendor", fs.ModeDir|0o555)
	checkMode("link-out", fs.ModeSymlink|0o777)
	if target, _ := os.Readlink(filepath.Join(dst, "link-out")); target != outside {
		t.Errorf("link-out -> %q", target)
	}
	if info, _ := os.Stat(filepath.Join(dst, "README.md")); !info.ModTime().Equal(old) {
		t.Errorf("README.md's time %v, want %v", info.ModTime(), old)
	}
	// The results directory is the copy's own parent: refused.
	if _, err := CopyTree(context.Background(), src, filepath.Join(t.TempDir(), "c"), nil, []string{src}); err == nil {
		t.Error("copying a tree excluded at its root succeeded")
	}
	// A root that is a link to the tree is copied as the tree.
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(src, link)
	if st, err := CopyTree(context.Background(), link, filepath.Join(t.TempDir(), "c"), rules, nil); err != nil || st.Files != 6 {
		t.Errorf("copying through a linked root: %+v, %v", st, err)
	}
	// dst must be new.
	if _, err := CopyTree(context.Background(), src, dst, rules, nil); err == nil {
		t.Error("copying onto an existing directory succeeded")
	}
}

// TestRemoveTreeUnwritable checks that a copy a guest left with
// directories of mode 0 is removed all the same.
func TestRemoveTreeUnwritable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "copy")
	writeTree(t, dir, map[string]string{"a/b/c.txt": "x", "d/e.txt": "y"})
	os.Chmod(filepath.Join(dir, "a/b"), 0)
	os.Chmod(filepath.Join(dir, "a"), 0)
	os.Chmod(filepath.Join(dir, "d"), 0o500)
	if err := RemoveTree(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); err == nil {
		t.Error("the tree is still there")
	}
}
