//go:build linux

package vfs

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/socketpair"
	"github.com/sbx-dev/sbx/policy"
)

// workspace is the mount the tests serve: a git worktree with secrets.
func workspace() policy.Mount {
	return policy.Mount{
		Guest:    "/workspace",
		Host:     ".",
		Access:   policy.ReadWrite,
		Hide:     []string{".env", ".env.*", ".git/config", "**/*.pem", "secrets/"},
		ReadOnly: []string{".git/hooks", "vendor"},
		Tmpfs:    []string{"node_modules", "build/cache"},
		Owner:    "agent",
	}
}

// tree makes the host side: a worktree in base/work and, next to it, a
// file outside the mount.
func tree(t *testing.T) (base, work string) {
	t.Helper()
	base = t.TempDir()
	work = filepath.Join(base, "work")
	files := map[string]string{
		"outside.txt":                  "outside the root\n",
		"work/.env":                    "TOKEN=host-secret\n",
		"work/.env.local":              "TOKEN=local\n",
		"work/.git/HEAD":               "ref: refs/heads/main\n",
		"work/.git/config":             "[remote \"origin\"]\n\turl = https://user:tok@example.test/r.git\n",
		"work/.git/hooks/pre-commit":   "#!/bin/sh\nexit 0\n",
		"work/src/main.go":             "package main\n",
		"work/src/certs/server.pem":    "-----BEGIN KEY-----\n",
		"work/secrets/db.txt":          "password\n",
		"work/vendor/lib.go":           "package lib\n",
		"work/node_modules/host-junk":  "the host's own node_modules\n",
		"work/build/out.txt":           "built\n",
		"work/build/cache/host-cached": "the host's own cache\n",
	}
	for name, content := range files {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return base, work
}

// snapshot is every path under dir with its type, mode and content hash,
// to prove a test changed nothing on the host.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		v := info.Mode().String()
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += fmt.Sprintf(" %x", sha256.Sum256(b))
		case info.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			v += " -> " + l
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range before {
		if after[k] != v {
			diffs = append(diffs, fmt.Sprintf("%s: %q -> %q", k, v, after[k]))
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: new %q", k, v))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("%s changed the host:\n%s", what, strings.Join(diffs, "\n"))
	}
}

// direct returns the root file of a server for m on work, to call the
// p9.File methods the way the 9P library would — and the way it would
// if its own name checks were missing.
func direct(t *testing.T, m policy.Mount, work string, lim Limits) (*Server, *file) {
	t.Helper()
	s, err := New(m, Options{HostDir: work, UID: 1000, GID: 1001, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	root, err := s.fs.newFile("")
	if err != nil {
		t.Fatal(err)
	}
	return s, root
}

// client serves m on work over a socket pair and returns the client's
// root, speaking 9P as the guest would.
func client(t *testing.T, m policy.Mount, work string, lim Limits) (*Server, p9.File) {
	t.Helper()
	s, err := New(m, Options{HostDir: work, UID: 1000, GID: 1001, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	host, guest := socketpair.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, host) }()
	t.Cleanup(func() {
		cancel()
		guest.Close()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return within 10s of its context's end")
		}
		s.Close()
	})
	c, err := p9.NewClient(guest, p9.WithMessageSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	root, err := c.Attach("")
	if err != nil {
		t.Fatal(err)
	}
	return s, root
}

// errno is the errno err carries, 0 for nil.
func errno(err error) unix.Errno {
	if err == nil {
		return 0
	}
	return unix.Errno(linux.ExtractErrno(err))
}

func wantErrno(t *testing.T, what string, err error, want unix.Errno) {
	t.Helper()
	if got := errno(err); got != want {
		t.Errorf("%s: got %v (%v), want %v", what, got, err, want)
	}
}

// walk walks from f through the names (each a single step) and closes
// nothing: the test's server is closed at its end.
func walk(f p9.File, names ...string) (p9.File, error) {
	_, nf, err := f.Walk(names)
	return nf, err
}

// readAll opens the file at names read-only and reads it.
func readAll(t *testing.T, root p9.File, names ...string) (string, error) {
	t.Helper()
	f, err := walk(root, names...)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, _, err := f.Open(p9.ReadOnly); err != nil {
		return "", err
	}
	buf := make([]byte, 1<<16)
	n, err := f.ReadAt(buf, 0)
	if err != nil && n == 0 && err.Error() != "EOF" {
		return "", err
	}
	return string(buf[:n]), nil
}

// list returns the names a directory lists, without "." and "..".
func list(t *testing.T, root p9.File, names ...string) []string {
	t.Helper()
	d, err := walk(root, names...)
	if err != nil {
		t.Fatalf("walk %v: %v", names, err)
	}
	defer d.Close()
	if _, _, err := d.Open(p9.ReadOnly); err != nil {
		t.Fatalf("open %v: %v", names, err)
	}
	var out []string
	off := uint64(0)
	for i := 0; i < 10000; i++ {
		ents, err := d.Readdir(off, 4096)
		if err != nil {
			t.Fatalf("readdir %v: %v", names, err)
		}
		if len(ents) == 0 {
			break
		}
		for _, e := range ents {
			if e.Name != "." && e.Name != ".." {
				out = append(out, e.Name)
			}
			off = e.Offset
		}
	}
	sort.Strings(out)
	return out
}
