package archive_test

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/archive/archivetest"
)

// TestRealDeb reads busybox-static as Debian ships it, fetched with
// apt-get download into the test cache.
func TestRealDeb(t *testing.T) {
	deb := archivetest.AptDownload(t, "busybox-static", "")

	data, hdr, err := archive.ExtractFile(deb, "bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("\x7fELF")) || len(data) < 500_000 || int64(len(data)) != hdr.Size {
		t.Errorf("bin/busybox: %d bytes (header says %d), starts %q; want a static ELF binary", len(data), hdr.Size, data[:min(len(data), 4)])
	}
	if hdr.Mode&0o111 == 0 {
		t.Errorf("bin/busybox mode %o is not executable", hdr.Mode)
	}

	f, err := os.Open(deb)
	if err != nil {
		t.Fatal(err)
	}
	fields, err := archive.Control(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if fields.Get("Package") != "busybox-static" || fields.Get("Version") == "" {
		t.Errorf("control: Package %q Version %q", fields.Get("Package"), fields.Get("Version"))
	}

	var names []string
	err = archive.WalkFile(deb, func(h *tar.Header, _ io.Reader) error {
		if err := archive.CheckEntry(h); err != nil {
			t.Errorf("Debian's own package has an unsafe entry: %v", err)
		}
		names = append(names, h.Name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 5 || names[0] != "bin" {
		t.Errorf("entries: %v", names)
	}

	// Cross-check the listing with dpkg-deb's own, where it is installed.
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Logf("dpkg-deb not installed; listing not cross-checked")
		return
	}
	out, err := exec.Command("dpkg-deb", "--contents", deb).Output()
	if err != nil {
		t.Fatalf("dpkg-deb --contents: %v", err)
	}
	var want []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		name := archive.CleanName(fields[5])
		if name != "." {
			want = append(want, name)
		}
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("Walk entries differ from dpkg-deb --contents (-dpkg +Walk):\n%s", diff)
	}
}
