package archive_test

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/archive/archivetest"
)

// FuzzWalk feeds arbitrary bytes to format detection, Walk, Extract and
// Control: they must return errors, never panic.
func FuzzWalk(f *testing.F) {
	for _, data := range formats(f) {
		f.Add(data)
	}
	f.Add(archivetest.Ar(f, archivetest.ArMember{Name: "debian-binary", Body: []byte("2.0\n")},
		archivetest.ArMember{Name: "data.tar", Body: []byte("short")}))
	f.Add([]byte{})
	f.Add([]byte("!<arch>\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		head := data[:min(len(data), 64<<10)]
		format, detectErr := archive.Detect(head)
		walkErr := archive.Walk(bytes.NewReader(data), func(h *tar.Header, body io.Reader) error {
			_ = archive.CheckEntry(h)
			_, err := io.Copy(io.Discard, body)
			return err
		})
		if detectErr != nil && walkErr == nil {
			t.Errorf("Detect failed (%v) but Walk succeeded", detectErr)
		}
		_, _, _ = archive.Extract(bytes.NewReader(data), "usr/*/tool")
		if format == archive.Deb || format == archive.APK {
			_, _ = archive.Control(bytes.NewReader(data))
		}
	})
}
