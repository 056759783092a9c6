package rootfs

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/archive/archivetest"
	"github.com/sbx-dev/sbx/internal/build/fetch"
	"github.com/sbx-dev/sbx/internal/build/layers"
	"github.com/sbx-dev/sbx/lang"
)

// privilegedTarball is a release tarball as a malicious input would make
// it: a setuid-root shell, a setgid binary, a program with file
// capabilities, a device node giving raw access to the guest's disk, and a
// hard link to that device.
func privilegedTarball(t testing.TB) []byte {
	ping := fileEnt("bin/ping", 0o755, 0, 0, "ping binary")
	ping.hdr.PAXRecords = map[string]string{
		"SCHILY.xattr.security.capability": "\x01\x00\x00\x02\x00\x20\x00\x00",
		"SCHILY.xattr.user.note":           "kept",
	}
	return gz(t, tarOf(t,
		dirEnt("bin/", 0o755),
		fileEnt("bin/rootsh", 0o4755, 0, 0, "setuid shell"),
		fileEnt("bin/mailer", 0o2755, 0, 12, "setgid mailer"),
		fileEnt("bin/tmpdir-tool", 0o1755, 0, 0, "sticky stays"),
		ping,
		dirEnt("dev/", 0o755),
		ent{hdr: tar.Header{Typeflag: tar.TypeBlock, Name: "dev/vda", Mode: 0o666, Devmajor: 254, Devminor: 0}},
		ent{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "dev/mem", Mode: 0o666, Devmajor: 1, Devminor: 1}},
		linkEnt("dev/disk", "dev/vda"),
		ent{hdr: tar.Header{Typeflag: tar.TypeFifo, Name: "dev/pipe", Mode: 0o644}},
	))
}

func privilegedSpec(keep bool) string {
	extra := ""
	if keep {
		extra = "\n    keep_special = true"
	}
	return `
image "agent" {
  artifact "evil" {
    source  = "https://downloads.example.com/evil.tar.gz"
    sha256  = "` + strings.Repeat("c", 64) + `"
    dest    = "/opt/evil"
    extract = true` + extra + `
  }
}
`
}

// TestExtractDropsPrivilege extracts a pinned archive carrying setuid and
// setgid bits, file capabilities and device nodes: by default none of
// them reaches the image (the guest's users cannot use the archive to
// become root or read the disk raw), and keep_special = true keeps them.
func TestExtractDropsPrivilege(t *testing.T) {
	dir := t.TempDir()
	in := Inputs{"artifact.evil": fileInput(t, dir, lang.SourceURL, privilegedTarball(t))}

	files, _ := readTar(t, assembleTar(t, loadImage(t, privilegedSpec(false)), in, Options{}))
	for p, mode := range map[string]int64{
		"/opt/evil/bin/rootsh":      0o755,
		"/opt/evil/bin/mailer":      0o755,
		"/opt/evil/bin/tmpdir-tool": 0o1755,
		"/opt/evil/bin/ping":        0o755,
	} {
		f, ok := files[p]
		if !ok {
			t.Errorf("%s: missing", p)
			continue
		}
		if f.hdr.Mode != mode {
			t.Errorf("%s: mode %#o, want %#o", p, f.hdr.Mode, mode)
		}
	}
	if x := files["/opt/evil/bin/ping"].hdr; x == nil || x.PAXRecords["SCHILY.xattr.security.capability"] != "" || x.PAXRecords["SCHILY.xattr.user.note"] != "kept" {
		t.Errorf("/opt/evil/bin/ping: want security.capability dropped and user.note kept: %+v", x)
	}
	for _, p := range []string{"/opt/evil/dev/vda", "/opt/evil/dev/mem", "/opt/evil/dev/disk"} {
		if f, ok := files[p]; ok {
			t.Errorf("%s is in the image (%s)", p, layers.TypeName(f.hdr.Typeflag))
		}
	}
	if f, ok := files["/opt/evil/dev/pipe"]; !ok || f.hdr.Typeflag != tar.TypeFifo {
		t.Error("/opt/evil/dev/pipe: a FIFO grants nothing and is kept")
	}

	files, _ = readTar(t, assembleTar(t, loadImage(t, privilegedSpec(true)), in, Options{}))
	if f := files["/opt/evil/bin/rootsh"]; f.hdr == nil || f.hdr.Mode != 0o4755 {
		t.Errorf("keep_special: /opt/evil/bin/rootsh = %+v, want mode 04755", f.hdr)
	}
	// dev/vda and dev/disk share one inode: the first in order is the
	// device, the other a hard link to it.
	if f := files["/opt/evil/dev/disk"]; f.hdr == nil || f.hdr.Typeflag != tar.TypeBlock || files["/opt/evil/dev/vda"].hdr == nil {
		t.Errorf("keep_special: /opt/evil/dev/disk = %+v, want a block device", f.hdr)
	}
	if x := files["/opt/evil/bin/ping"].hdr; x == nil || x.PAXRecords["SCHILY.xattr.security.capability"] == "" {
		t.Errorf("keep_special: /opt/evil/bin/ping lost its capabilities: %+v", x)
	}
}

// bombSpec is an image of the given size (or none) with an artifact that
// unpacks the archive under /opt/bomb.
func bombSpec(size string) string {
	attr := ""
	if size != "" {
		attr = "\n  size = \"" + size + "\""
	}
	return `
image "agent" {` + attr + `
  artifact "bomb" {
    source  = "https://downloads.example.com/bomb.tar.gz"
    sha256  = "` + strings.Repeat("d", 64) + `"
    dest    = "/opt/bomb"
    extract = true
  }
}
`
}

// TestArchiveBombStopsAtImageSize unpacks a gzip bomb — a tar.gz of a few
// hundred kilobytes holding a 256 MiB file of zeros — into an image of
// 16 MiB: assembly must stop with an error naming the artifact once the
// archive expands past the bound the image's size sets (96 MiB), instead
// of spilling it all.
func TestArchiveBombStopsAtImageSize(t *testing.T) {
	dir := t.TempDir()
	blob := filepath.Join(dir, "bomb.tar.gz")
	archivetest.LargeTarGz(t, blob, "zeros", 256<<20)
	in := Inputs{"artifact.bomb": fetch.Fetched{Kind: lang.SourceURL, File: &fetch.Blob{Path: blob}}}

	tree, err := Assemble(context.Background(), loadImage(t, bombSpec("16MiB")), in, Options{TempDir: dir})
	if err == nil {
		e, _ := tree.Lookup("/opt/bomb/zeros")
		tree.Close()
		t.Fatalf("the bomb unpacked into a 16 MiB image (/opt/bomb/zeros is %d bytes)", e.Size)
	}
	var le *layers.LimitError
	if !errors.As(err, &le) || le.Entries || le.Limit != 2*16<<20+64<<20 {
		t.Errorf("err = %v, want a byte limit of 96 MiB", err)
	}
	for _, want := range []string{`artifact "bomb"`, "zeros", "16MiB", "96MiB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to name %q", err, want)
		}
	}

	// A single file taken out of the archive is bounded the same way.
	single := strings.Replace(bombSpec("16MiB"), "extract = true", `file    = "zeros"`, 1)
	_, err = Assemble(context.Background(), loadImage(t, single), in, Options{TempDir: dir})
	if !errors.As(err, &le) || !strings.Contains(err.Error(), `artifact "bomb"`) {
		t.Errorf("one file out of the bomb: err = %v, want the byte limit", err)
	}
}

// TestArchiveEntryBomb unpacks an archive of more entries than an image of
// its size may take in: assembly stops with an error naming the artifact.
func TestArchiveEntryBomb(t *testing.T) {
	limits := ContentLimits(16 << 20)
	n := limits.Entries + 10
	ents := make([]archivetest.Entry, n)
	for i := range ents {
		ents[i] = archivetest.Entry{Name: fmt.Sprintf("d%d/f%d", i/1000, i)}
	}
	dir := t.TempDir()
	in := Inputs{"artifact.bomb": fileInput(t, dir, lang.SourceURL, archivetest.Compress(t, archive.Gzip, archivetest.Tar(t, ents...)))}
	_, err := Assemble(context.Background(), loadImage(t, bombSpec("16MiB")), in, Options{TempDir: dir})
	var le *layers.LimitError
	if !errors.As(err, &le) || !le.Entries || !strings.Contains(err.Error(), `artifact "bomb"`) {
		t.Errorf("err = %v, want the entry limit for artifact \"bomb\"", err)
	}
	if got := ContentLimits(0); got.Bytes != DefaultMaxContent || got.Entries != maxEntries {
		t.Errorf("limits of an image without a size: %+v", got)
	}
}
