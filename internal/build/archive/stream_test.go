package archive_test

import (
	"archive/tar"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/archive/archivetest"
)

// streamed is what ExtractFileTo handed its function.
type streamed struct {
	name  string
	mode  int64
	body  string
	calls int
}

func extractTo(path, pattern string) (streamed, error) {
	var s streamed
	err := archive.ExtractFileTo(path, pattern, func(hdr *tar.Header, body io.Reader) error {
		b, err := io.ReadAll(body)
		if err != nil {
			return err
		}
		s.name, s.mode, s.body = hdr.Name, hdr.Mode, string(b)
		s.calls++
		return nil
	})
	return s, err
}

func TestExtractFileTo(t *testing.T) {
	entries := []E{
		{Name: "./boot/"},
		{Name: "./boot/vmlinuz-6.1.0-9-amd64", Body: "kernel image"},
		{Name: "./lib/modules/6.1.0-9-amd64/kernel/a.ko", Body: "a"},
		{Name: "./lib/modules/6.1.0-9-amd64/kernel/b.ko", Body: "b"},
		{Name: "./usr/bin/tool", Body: "first"},
		{Name: "./usr/bin/tool", Body: "second", Mode: 0o755},
		{Name: "./usr/bin/alias", Type: tar.TypeSymlink, Linkname: "../sbin/real"},
		{Name: "./usr/bin/chain", Type: tar.TypeSymlink, Linkname: "/usr/sbin/hard"},
		// The link comes before its target: the first pass has seen
		// every entry when it resolves links.
		{Name: "./usr/sbin/hard", Type: tar.TypeLink, Linkname: "./usr/sbin/real"},
		{Name: "./usr/sbin/real", Body: "real bytes"},
		{Name: "./usr/sbin/abs-hard", Type: tar.TypeLink, Linkname: "/usr/sbin/real"},
		{Name: "./usr/sbin/escape", Type: tar.TypeSymlink, Linkname: "../../../etc/passwd"},
		{Name: "./usr/sbin/dangling", Type: tar.TypeSymlink, Linkname: "reel"},
		{Name: "./usr/sbin/glob", Type: tar.TypeSymlink, Linkname: "re*"},
		{Name: "./loop/a", Type: tar.TypeSymlink, Linkname: "b"},
		{Name: "./loop/b", Type: tar.TypeSymlink, Linkname: "a"},
		{Name: "./was-link", Type: tar.TypeSymlink, Linkname: "usr/sbin/real"},
		{Name: "./was-link", Body: "replaced by a file"},
		{Name: "./was-file", Body: "replaced by a link"},
		{Name: "./was-file", Type: tar.TypeSymlink, Linkname: "usr/sbin/real"},
	}
	dir := t.TempDir()
	archives := map[string][]byte{
		"tar+gzip": archivetest.Compress(t, archive.Gzip, archivetest.Tar(t, entries...)),
		"deb":      archivetest.Deb(t, debControl, archive.Xz, entries...),
		"apk":      archivetest.APK(t, pkginfo, true, entries...),
	}
	for format, data := range archives {
		path := filepath.Join(dir, strings.ReplaceAll(format, "+", "."))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Run(format, func(t *testing.T) {
			for _, tc := range []struct {
				pattern, name, body string
				mode                int64
			}{
				{"boot/vmlinuz-*", "boot/vmlinuz-6.1.0-9-amd64", "kernel image", 0o644},
				{"/usr/bin/tool", "usr/bin/tool", "second", 0o755},
				{"usr/bin/alias", "usr/sbin/real", "real bytes", 0o644},
				{"usr/bin/chain", "usr/sbin/real", "real bytes", 0o644},
				{"./usr/sbin/hard", "usr/sbin/real", "real bytes", 0o644},
				{"usr/sbin/abs-hard", "usr/sbin/real", "real bytes", 0o644},
				{"was-link", "was-link", "replaced by a file", 0o644},
				{"was-file", "usr/sbin/real", "real bytes", 0o644},
			} {
				got, err := extractTo(path, tc.pattern)
				want := streamed{name: tc.name, mode: tc.mode, body: tc.body, calls: 1}
				if err != nil || got != want {
					t.Errorf("ExtractFileTo(%q) = %+v, %v; want %+v", tc.pattern, got, err, want)
				}
				// ExtractFile gives the same file, in memory.
				data, hdr, err := archive.ExtractFile(path, tc.pattern)
				if err != nil || string(data) != tc.body || hdr.Name != tc.name {
					t.Errorf("ExtractFile(%q) = %q, %v, %v; want %q from %s", tc.pattern, data, hdr, err, tc.body, tc.name)
				}
			}
			for _, tc := range []struct{ pattern, err string }{
				{"lib/modules/*/kernel/*.ko", `pattern "lib/modules/*/kernel/*.ko" matches 2 files in archive ` + path +
					` (lib/modules/6.1.0-9-amd64/kernel/a.ko, lib/modules/6.1.0-9-amd64/kernel/b.ko); it must match exactly one`},
				{"boot/vmlinux-*", "archive " + path + ` has no file "boot/vmlinux-*"; near: boot/vmlinuz-6.1.0-9-amd64`},
				{"usr/sbin/escape", "archive " + path + ": usr/sbin/escape links outside the archive (../../../etc/passwd)"},
				{"usr/sbin/dangling", "archive " + path + ` has no file "/usr/sbin/reel"; near: usr/sbin/abs-hard, usr/sbin/dangling, usr/sbin/escape, usr/sbin/glob, usr/sbin/hard`},
				{"usr/sbin/glob", "archive " + path + `: usr/sbin/glob links to "usr/sbin/re*", which is not a plain name`},
				{"loop/a", "archive " + path + `: too many links resolving "loop/a"`},
				{"boot/[", `bad pattern "boot/["`},
			} {
				got, err := extractTo(path, tc.pattern)
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) || got.calls != 0 {
					t.Errorf("ExtractFileTo(%q) = %+v, %v; want no call and the error %s", tc.pattern, got, err, tc.err)
				}
			}
		})
	}

	t.Run("error types", func(t *testing.T) {
		path := filepath.Join(dir, "tar.gzip")
		_, err := extractTo(path, "usr/sbin/dangling")
		var nf *archive.NotFoundError
		if !errors.As(err, &nf) || nf.Pattern != "/usr/sbin/reel" || nf.Archive != path {
			t.Errorf("err = %#v, want *NotFoundError for /usr/sbin/reel", err)
		}
		_, err = extractTo(path, "lib/modules/*/kernel/*.ko")
		var ae *archive.AmbiguousError
		if !errors.As(err, &ae) || ae.Count != 2 {
			t.Errorf("err = %#v, want *AmbiguousError", err)
		}
	})
	t.Run("function error returned as it is", func(t *testing.T) {
		boom := errors.New("disk full")
		err := archive.ExtractFileTo(filepath.Join(dir, "deb"), "usr/bin/alias", func(*tar.Header, io.Reader) error { return boom })
		if err != boom {
			t.Errorf("err = %v, want %v unwrapped", err, boom)
		}
	})
	t.Run("missing archive", func(t *testing.T) {
		_, err := extractTo(filepath.Join(dir, "none.tgz"), "x")
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("err = %v, want a not-exist error", err)
		}
	})
}

// allocated returns the bytes f allocates on the heap, all goroutines
// counted (the test runs alone: it is not parallel).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestExtractFileToStreams extracts a 256 MiB file from a tar+gzip and
// checks that it streams: the bytes allocated while extracting it stay far
// below its size. ExtractFile, which holds the file in memory, is measured
// the same way to show the measurement sees a whole-file buffer.
func TestExtractFileToStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads a 256 MiB file")
	}
	const size = 256 << 20
	path := filepath.Join(t.TempDir(), "big.tgz")
	archivetest.LargeTarGz(t, path, "package/big", size)
	want := sha256.Sum256(make([]byte, size))

	var (
		n   int64
		sum []byte
		err error
	)
	streaming := allocated(func() {
		err = archive.ExtractFileTo(path, "package/big", func(hdr *tar.Header, body io.Reader) error {
			h := sha256.New()
			var err error
			n, err = io.Copy(h, body)
			sum = h.Sum(nil)
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != size || fmt.Sprintf("%x", sum) != fmt.Sprintf("%x", want) {
		t.Fatalf("streamed %d bytes, sha256 %x; want %d zero bytes, %x", n, sum, size, want)
	}
	if limit := uint64(size / 32); streaming > limit {
		t.Errorf("ExtractFileTo allocated %d bytes extracting a %d-byte file; want at most %d", streaming, size, limit)
	}

	var data []byte
	whole := allocated(func() { data, _, err = archive.ExtractFile(path, "package/big") })
	if err != nil || len(data) != size {
		t.Fatalf("ExtractFile = %d bytes, %v", len(data), err)
	}
	if whole < size {
		t.Errorf("ExtractFile allocated %d bytes for a %d-byte file: the measurement does not see the buffer", whole, size)
	}
	t.Logf("allocated: %d bytes streaming, %d bytes in memory", streaming, whole)
}
