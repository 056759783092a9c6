//go:build linux

package vfs

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/policy"
)

// Several programs at once on one mount: each worker creates, writes,
// reads back, renames and removes files in its own directory while the
// others do, through the kernel's client and the session's workers.
func TestFUSEConcurrentClients(t *testing.T) {
	_, work := tree(t)
	mnt, s := fuseMount(t, workspace(), work, Limits{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir := filepath.Join(mnt, fmt.Sprintf("w%d", w))
			if err := os.Mkdir(dir, 0o755); err != nil {
				errs <- err
				return
			}
			for i := range 50 {
				p := filepath.Join(dir, fmt.Sprintf("f%d", i))
				want := fmt.Sprintf("worker %d file %d\n", w, i)
				if err := writeFile(p, []byte(want), 0o644); err != nil {
					errs <- err
					return
				}
				if err := os.Rename(p, p+".moved"); err != nil {
					errs <- err
					return
				}
				if b, err := readFile(p + ".moved"); err != nil || string(b) != want {
					errs <- fmt.Errorf("read %s: %q, %v", p, b, err)
					return
				}
				if i%2 == 0 {
					if err := os.Remove(p + ".moved"); err != nil {
						errs <- err
						return
					}
				}
			}
			if ents, err := os.ReadDir(dir); err != nil || len(ents) != 25 {
				errs <- fmt.Errorf("%s lists %d entries (%v); want 25", dir, len(ents), err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The kernel releases a closed file after close returns, on its
	// own: wait for the releases, within a bound.
	for deadline := time.Now().Add(10 * time.Second); s.fs.open.Load() != 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.fs.open.Load(); n != 0 {
		t.Errorf("%d host files still open 10 s after every program closed its files", n)
	}
}

// BenchmarkFUSEGitStatus measures git status on 2000 files through the
// host kernel's FUSE client against the same tree on disk: what the
// session costs by itself, without a virtqueue. Not a test: read the
// numbers.
func BenchmarkFUSEGitStatus(b *testing.B) {
	work := b.TempDir()
	for d := range 40 {
		for f := range 50 {
			p := filepath.Join(work, fmt.Sprintf("d%02d", d), fmt.Sprintf("f%02d.txt", f))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := writeFile(p, []byte(p), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "files"}} {
		if out, err := run(b, work, "git", args...); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	mnt, _ := fuseMount(b, policy.Mount{Guest: "/workspace", Host: ".", Access: policy.ReadWrite}, work, Limits{})
	for _, c := range []struct{ name, dir string }{{"disk", work}, {"fuse", mnt}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if out, err := run(b, c.dir, "git", "-c", "safe.directory=*", "status", "--porcelain"); err != nil || out != "" {
					b.Fatalf("git status: %v\n%s", err, out)
				}
			}
		})
	}
}
