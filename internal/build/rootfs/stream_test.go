package rootfs

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/archive/archivetest"
	"github.com/sbx-dev/sbx/internal/build/fetch"
	"github.com/sbx-dev/sbx/lang"
)

// TestLargeArtifactStreams places a 256 MiB file from a tar+gzip artifact
// and checks that it goes from the archive to the tree's spill file as a
// stream: the bytes allocated while assembling stay far below its size.
func TestLargeArtifactStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads a 256 MiB file")
	}
	const size = 256 << 20
	dir := t.TempDir()
	blob := filepath.Join(dir, "codex.tgz")
	archivetest.LargeTarGz(t, blob, "package/codex", size)
	img := loadImage(t, `
image "agent" {
  artifact "codex" {
    source = "npm:@openai/codex@0.1.0"
    file   = "package/codex"
    dest   = "/usr/local/bin/codex"
  }
}
`)
	in := Inputs{"artifact.codex": fetch.Fetched{Kind: lang.SourceNPM, File: &fetch.Blob{Path: blob}}}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tree, err := Assemble(context.Background(), img, in, Options{TempDir: dir})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(size/16); got > limit {
		t.Errorf("Assemble allocated %d bytes placing a %d-byte artifact; want at most %d", got, size, limit)
	}

	e, ok := tree.Lookup("/usr/local/bin/codex")
	if !ok || e.Type != tar.TypeReg || e.Size != size || e.Mode != 0o755 {
		t.Fatalf("/usr/local/bin/codex = %+v, %v; want a %d-byte regular file, mode 0755", e, ok, size)
	}
	r, err := tree.Open("/usr/local/bin/codex")
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(make([]byte, size)); !bytes.Equal(h.Sum(nil), want[:]) {
		t.Errorf("/usr/local/bin/codex: sha256 %x, want %x (%d zero bytes)", h.Sum(nil), want, size)
	}
}
