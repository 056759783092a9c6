package image_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/fetch"
	"github.com/sbx-dev/sbx/internal/build/image"
)

// assertNoOutputs fails if the cache holds any build output or leftover
// temporary file.
func assertNoOutputs(t *testing.T, c *cache.Cache) {
	t.Helper()
	for _, sub := range []string{"outputs", "tmp"} {
		var found []string
		filepath.WalkDir(filepath.Join(c.Root(), sub), func(p string, d os.DirEntry, err error) error {
			if err == nil && p != filepath.Join(c.Root(), sub) {
				found = append(found, p)
			}
			return nil
		})
		if len(found) > 0 {
			t.Errorf("the failed build left %s behind in the cache: %v", sub, found)
		}
	}
}

// assertEmptyDir fails if dir holds anything.
func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("%s holds %v after a failed build", dir, names)
	}
}

func TestBuildErrors(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)

	t.Run("no kernel", func(t *testing.T) {
		cfg, lock := w.configure(t, specOptions{noKernel: true})
		_, err := image.Build(ctx, cfg.Images["box"], lock.Lookup("box"), w.options(t, nil))
		if err == nil || !strings.Contains(err.Error(), `image "box" has no kernel source`) || !strings.Contains(err.Error(), "main.hcl:1") {
			t.Errorf("building without a kernel: %v", err)
		}
	})

	t.Run("not locked", func(t *testing.T) {
		cfg, lock := w.configure(t, specOptions{})
		li := *lock.Lookup("box")
		li.InputHash = "sha256:" + strings.Repeat("0", 64)
		c := newCache(t)
		_, err := image.Build(ctx, cfg.Images["box"], &li, w.options(t, c))
		if err == nil || !strings.Contains(err.Error(), "sbx lock") {
			t.Errorf("building with a stale lock: %v", err)
		}
		if _, err := image.Build(ctx, cfg.Images["box"], nil, w.options(t, c)); err == nil || !strings.Contains(err.Error(), "not in the lock") {
			t.Errorf("building without a lock entry: %v", err)
		}
		assertNoOutputs(t, c)
	})

	t.Run("tampered npm tarball", func(t *testing.T) {
		cfg, lock := w.configure(t, specOptions{})
		bad := w.npm.tamper("#!/bin/sh\necho evil\n")
		defer func() {
			w.npm.mu.Lock()
			w.npm.tampered = nil
			w.npm.mu.Unlock()
		}()
		sum := sha256.Sum256(bad)
		badHex := hex.EncodeToString(sum[:])
		c := newCache(t)
		opts := w.options(t, c)
		_, err := image.Build(ctx, cfg.Images["box"], lock.Lookup("box"), opts)
		if err == nil {
			t.Fatal("a tampered tarball was accepted")
		}
		t.Logf("the error: %v", err)
		pin := lock.Lookup("box").Inputs["artifact.tool"]
		for _, s := range []string{"artifact.tool", pin.SHA256, badHex} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("the error does not name %s:\n%v", s, err)
			}
		}
		if c.Has("sha256:" + badHex) {
			t.Error("the tampered tarball is in the cache")
		}
		assertNoOutputs(t, c)
		assertEmptyDir(t, opts.TempDir)
	})

	t.Run("tampered layer blob", func(t *testing.T) {
		cfg, lock := w.configure(t, specOptions{})
		w.tamperBlobs.Store(true)
		defer w.tamperBlobs.Store(false)
		c := newCache(t)
		opts := w.options(t, c)
		_, err := image.Build(ctx, cfg.Images["box"], lock.Lookup("box"), opts)
		if err == nil {
			t.Fatal("a tampered blob was accepted")
		}
		t.Logf("the error: %v", err)
		if !strings.Contains(err.Error(), "base") || len(regexp.MustCompile(`[0-9a-f]{64}`).FindAllString(err.Error(), -1)) < 2 {
			t.Errorf("the error does not name the input and both hashes:\n%v", err)
		}
		assertNoOutputs(t, c)
		assertEmptyDir(t, opts.TempDir)
	})

	t.Run("file missing from archive", func(t *testing.T) {
		cfg, lock := w.configure(t, specOptions{toolFile: "package/bin/nope"})
		c := newCache(t)
		opts := w.options(t, c)
		_, err := image.Build(ctx, cfg.Images["box"], lock.Lookup("box"), opts)
		if err == nil {
			t.Fatal("an artifact naming a missing file was built")
		}
		t.Logf("the error: %v", err)
		for _, s := range []string{"package/bin/nope", "tool", "main.hcl:"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("the error does not name %s:\n%v", s, err)
			}
		}
		assertNoOutputs(t, c)
		assertEmptyDir(t, opts.TempDir)
	})

	t.Run("too large for size", func(t *testing.T) {
		cfg, lock := w.configure(t, specOptions{size: "1MiB"})
		c := newCache(t)
		opts := w.options(t, c)
		_, err := image.Build(ctx, cfg.Images["box"], lock.Lookup("box"), opts)
		if err == nil {
			t.Fatal("an image larger than its size was built")
		}
		t.Logf("the error: %v", err)
		m := regexp.MustCompile(`at least (\d+MiB) \((\d+) bytes\)`).FindStringSubmatch(err.Error())
		if !strings.Contains(err.Error(), `image "box"`) || !strings.Contains(err.Error(), "declared size 1MiB (1048576 bytes)") || m == nil {
			t.Fatalf("the error does not name the image, the declared size and the minimum:\n%v", err)
		}
		assertNoOutputs(t, c)
		assertEmptyDir(t, opts.TempDir)

		// The minimum it names is enough.
		cfg, lock = w.configure(t, specOptions{size: m[1]})
		r, err := image.Build(ctx, cfg.Images["box"], lock.Lookup("box"), w.options(t, c))
		if err != nil {
			t.Fatalf("building at the minimum the error named (%s): %v", m[1], err)
		}
		if want := m[2]; strconv.FormatInt(r.DiskSize, 10) != want {
			t.Errorf("disk size %d, want the minimum %s", r.DiskSize, want)
		}
	})

	t.Run("default size", func(t *testing.T) {
		cfg, lock := w.configure(t, specOptions{size: "none"})
		r, err := image.Build(ctx, cfg.Images["box"], lock.Lookup("box"), w.options(t, nil))
		if err != nil {
			t.Fatal(err)
		}
		// About 2 MiB of content and 512 MiB of headroom, rounded up to
		// a multiple of 64 MiB.
		if r.DiskSize != 576<<20 {
			t.Errorf("default size %d, want 576 MiB", r.DiskSize)
		}
	})

	t.Run("full disk", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("SKIPPING THE FULL-DISK TEST: it mounts a small tmpfs, which needs root")
		}
		cfg, lock := w.configure(t, specOptions{})
		img, li := cfg.Images["box"], lock.Lookup("box")

		// The cache fills up while outputs are stored.
		mnt := tmpfs(t, 256<<20)
		c, err := cache.Open(filepath.Join(mnt, "cache"))
		if err != nil {
			t.Fatal(err)
		}
		opts := w.options(t, c)
		if _, err := fetch.Inputs(ctx, img, li, c, opts.Fetch); err != nil {
			t.Fatal(err)
		}
		fill(t, filepath.Join(mnt, "filler"), 512<<10)
		_, err = image.Build(ctx, img, li, opts)
		t.Logf("the error: %v", err)
		if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), `image "box"`) {
			t.Errorf("building into a full cache: %v, want ENOSPC naming the image", err)
		}
		assertNoOutputs(t, c)
		assertEmptyDir(t, opts.TempDir)

		// The staging directory fills up while the disk is written.
		small := tmpfs(t, 4<<20)
		c2 := newCache(t)
		opts = w.options(t, c2)
		opts.TempDir = small
		_, err = image.Build(ctx, img, li, opts)
		t.Logf("the error: %v", err)
		if !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("building in a full staging directory: %v, want ENOSPC", err)
		}
		assertNoOutputs(t, c2)
		assertEmptyDir(t, small)
	})
}

// tmpfs mounts a tmpfs of size bytes on a new directory and unmounts it
// when the test ends.
func tmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)); err != nil {
		t.Skipf("SKIPPING THE FULL-DISK TEST: cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file that leaves about free bytes on its file system.
func fill(t *testing.T, path string, free int64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(path), &st); err != nil {
		t.Fatal(err)
	}
	avail := int64(st.Bavail) * st.Bsize
	if avail <= free {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for n := avail - free; n > 0; {
		chunk := min(n, int64(len(buf)))
		if _, err := f.Write(buf[:chunk]); err != nil {
			t.Fatal(err)
		}
		n -= chunk
	}
}
