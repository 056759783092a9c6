package archivetest

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"strings"
	"testing"
)

// LargeTarGz writes to path a gzip-compressed tar holding a small file,
// name+".txt", and then name: a regular file (mode 0755) of size zero
// bytes. The archive is written as a stream, so neither it nor the file
// is ever in memory: tests use it to check that a reader streams too.
func LargeTarGz(t testing.TB, path, name string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw, err := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(zw)
	note := "a large file follows\n"
	for _, e := range []struct {
		hdr  *tar.Header
		body io.Reader
	}{
		{&tar.Header{Name: name + ".txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(note)), ModTime: epoch, Format: tar.FormatPAX}, strings.NewReader(note)},
		{&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: size, ModTime: epoch, Format: tar.FormatPAX}, io.LimitReader(zeros{}, size)},
	} {
		if err := tw.WriteHeader(e.hdr); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if _, err := io.Copy(tw, e.body); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := zw.Close(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
