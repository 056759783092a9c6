package cache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func writeBytes(b []byte) func(io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(b); return err }
}

// files lists every file under root, relative to it.
func files(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPutAndPath(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("hello, cache\n")
	d := digestOf(data)
	if _, ok := c.Path(d); ok {
		t.Fatal("blob present before Put")
	}
	p, err := c.Put(context.Background(), d, writeBytes(data))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("blob content %q, %v", got, err)
	}
	if want := filepath.Join(c.Root(), "blobs", "sha256", strings.TrimPrefix(d, "sha256:")); p != want {
		t.Errorf("path %s, want %s", p, want)
	}
	// Bare hex names the same blob.
	if p2, ok := c.Path(strings.TrimPrefix(d, "sha256:")); !ok || p2 != p {
		t.Errorf("Path(bare hex) = %s, %v", p2, ok)
	}
	// A second Put of a present blob does not call the writer.
	called := false
	if _, err := c.Put(context.Background(), d, func(io.Writer) error { called = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if called {
		t.Error("Put called the writer for a blob already present")
	}
	if err := c.Verify(context.Background(), d); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if got := files(t, c.Root()); len(got) != 1 {
		t.Errorf("cache holds %v, want one blob", got)
	}
}

func TestPutWrongDigestLeavesNothing(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := digestOf([]byte("expected"))
	_, err = c.Put(context.Background(), want, writeBytes([]byte("tampered")))
	var me *MismatchError
	if !errors.As(err, &me) {
		t.Fatalf("err = %v, want *MismatchError", err)
	}
	if me.Want != want || me.Got != digestOf([]byte("tampered")) || me.Size != 8 {
		t.Errorf("mismatch = %+v", me)
	}
	for _, h := range []string{me.Want, me.Got} {
		if !strings.Contains(err.Error(), h) {
			t.Errorf("error %q does not name %s", err, h)
		}
	}
	if got := files(t, c.Root()); len(got) != 0 {
		t.Errorf("a failed Put left %v", got)
	}
	if c.Has(want) {
		t.Error("blob present after a failed Put")
	}
}

func TestPutWriterFailsMidway(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("x"), 1<<20)
	boom := errors.New("connection reset")
	_, err = c.Put(context.Background(), digestOf(data), func(w io.Writer) error {
		if _, err := w.Write(data[:len(data)/2]); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the writer's error", err)
	}
	if got := files(t, c.Root()); len(got) != 0 {
		t.Errorf("a failed Put left %v", got)
	}
}

func TestPutCancelled(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	data := []byte("abc")
	_, err = c.Put(ctx, digestOf(data), func(w io.Writer) error {
		if _, err := w.Write(data[:1]); err != nil {
			return err
		}
		cancel()
		_, err := w.Write(data[1:])
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if got := files(t, c.Root()); len(got) != 0 {
		t.Errorf("a cancelled Put left %v", got)
	}
}

func TestConcurrentPuts(t *testing.T) {
	root := t.TempDir()
	blobs := make([][]byte, 4)
	for i := range blobs {
		blobs[i] = bytes.Repeat([]byte(fmt.Sprintf("blob %d;", i)), 50000)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Separate Cache values on one root, as separate processes have.
			c, err := Open(root)
			if err != nil {
				errs <- err
				return
			}
			b := blobs[g%len(blobs)]
			p, err := c.Put(context.Background(), digestOf(b), func(w io.Writer) error {
				// Write in small pieces so that Puts interleave.
				for off := 0; off < len(b); off += 4096 {
					if _, err := w.Write(b[off:min(off+4096, len(b))]); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				errs <- err
				return
			}
			got, err := os.ReadFile(p)
			if err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(got, b) {
				errs <- fmt.Errorf("%s holds other content", p)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	c, _ := Open(root)
	for _, b := range blobs {
		if err := c.Verify(context.Background(), digestOf(b)); err != nil {
			t.Error(err)
		}
	}
	if got := files(t, root); len(got) != len(blobs) {
		t.Errorf("cache holds %d files, want %d: %v", len(got), len(blobs), got)
	}
}

func TestVerifyDetectsCorruption(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("original")
	d := digestOf(data)
	p, err := c.Put(context.Background(), d, writeBytes(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("bit rot!"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = c.Verify(context.Background(), d)
	var me *MismatchError
	if !errors.As(err, &me) || me.Got != digestOf([]byte("bit rot!")) {
		t.Fatalf("Verify = %v, want a mismatch naming the corrupt content", err)
	}
	if c.Has(d) {
		t.Error("a corrupt blob stayed in the cache")
	}
	if err := c.Verify(context.Background(), d); err == nil || !strings.Contains(err.Error(), "not in the cache") {
		t.Errorf("Verify of an absent blob = %v", err)
	}
}

func TestOutputs(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in := digestOf([]byte("recipe"))
	if _, ok, err := c.OutputPath(in, "disk"); ok || err != nil {
		t.Fatalf("OutputPath before PutOutput = %v, %v", ok, err)
	}
	p, d, err := c.PutOutput(context.Background(), in, "disk", writeBytes([]byte("disk v1")))
	if err != nil {
		t.Fatal(err)
	}
	if d != digestOf([]byte("disk v1")) {
		t.Errorf("digest %s", d)
	}
	if want := filepath.Join(c.Root(), "outputs", strings.TrimPrefix(in, "sha256:"), "disk"); p != want {
		t.Errorf("path %s, want %s", p, want)
	}
	// A failed rewrite keeps the earlier output.
	if _, _, err := c.PutOutput(context.Background(), in, "disk", func(w io.Writer) error {
		w.Write([]byte("half"))
		return errors.New("disk full")
	}); err == nil {
		t.Fatal("PutOutput with a failing writer succeeded")
	}
	if b, _ := os.ReadFile(p); string(b) != "disk v1" {
		t.Errorf("output after a failed rewrite = %q", b)
	}
	if _, _, err := c.PutOutput(context.Background(), in, "disk", writeBytes([]byte("disk v2"))); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "disk v2" {
		t.Errorf("output after a rewrite = %q", b)
	}
	for _, bad := range []string{"", "..", "a/b", ".hidden"} {
		if _, _, err := c.PutOutput(context.Background(), in, bad, writeBytes(nil)); err == nil {
			t.Errorf("output name %q accepted", bad)
		}
	}
	if _, _, err := c.PutOutput(context.Background(), "not-a-hash", "disk", writeBytes(nil)); err == nil {
		t.Error("malformed input hash accepted")
	}
}

func TestUnusableRoot(t *testing.T) {
	// A root below a regular file cannot be created, whoever runs the test.
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(file, "cache")
	_, err := Open(root)
	if err == nil || !strings.Contains(err.Error(), "cache "+root+" is not usable") || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Open(%s) = %v", root, err)
	}
}

func TestReadOnlyRoot(t *testing.T) {
	root := t.TempDir()
	c, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(root, "tmp")
	if err := os.Chmod(tmp, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(tmp, 0o755) })
	// Permission bits do not bind the superuser; then the same failure
	// is made by putting a file where the directory was.
	if os.Geteuid() == 0 {
		os.Chmod(tmp, 0o755)
		if err := os.Remove(tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(tmp, nil, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	data := []byte("x")
	_, err = c.Put(context.Background(), digestOf(data), writeBytes(data))
	if err == nil || !strings.Contains(err.Error(), "cache "+root+" is not writable") {
		t.Fatalf("Put into a read-only cache = %v", err)
	}
	if c.Has(digestOf(data)) {
		t.Error("blob present after a failed Put")
	}
}

func TestDefaultRoot(t *testing.T) {
	t.Setenv(EnvRoot, "/some/where")
	if r, err := DefaultRoot(); err != nil || r != "/some/where" {
		t.Errorf("DefaultRoot with %s set = %s, %v", EnvRoot, r, err)
	}
	t.Setenv(EnvRoot, "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	t.Setenv("HOME", "/home/u")
	r, err := DefaultRoot()
	if err != nil {
		t.Fatal(err)
	}
	ucd, _ := os.UserCacheDir()
	if r != filepath.Join(ucd, "sbx") {
		t.Errorf("DefaultRoot = %s, want %s", r, filepath.Join(ucd, "sbx"))
	}
}

func TestRemoveStale(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(c.Root(), "tmp", "abc.partial-1")
	young := filepath.Join(c.Root(), "tmp", "abc.partial-2")
	for _, p := range []string{old, young} {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(old, now.Add(-48*time.Hour), now.Add(-48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(young, now.Add(-time.Minute), now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveStale(now, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); err == nil {
		t.Error("stale temporary file kept")
	}
	if _, err := os.Stat(young); err != nil {
		t.Error("young temporary file removed")
	}
}
