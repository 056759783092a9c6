package fetch

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/mirror"
)

// TestURLFromMirror checks that a url input whose copy, with the pinned
// sha256, is in the mirror directory is copied into the cache without a
// request; that a copy with other content is not used (the download
// is); and that a download that fails says where a copy can go and which
// variable names the URL.
func TestURLFromMirror(t *testing.T) {
	kernel := bytes.Repeat([]byte("vmlinuz"), 1000)
	srv, log := urlServer(t, map[string][]byte{"/dl/vmlinuz": kernel}, nil)
	sha := sha256Hex(kernel)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "vmlinuz"), kernel, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := Options{HTTPClient: tlsClient(srv), MirrorDir: dir}
	spec, lock := urlImage(srv.URL+"/dl/vmlinuz", sha)
	c := openCache(t)
	got, err := Inputs(context.Background(), spec, lock, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(got["kernel"].File.Path); !bytes.Equal(b, kernel) || got["kernel"].File.Digest != "sha256:"+sha {
		t.Errorf("the mirror's copy is not what the cache holds: %+v", got["kernel"].File)
	}
	if n := log.n(); n != 0 {
		t.Errorf("fetching with the copy in the mirror made %d requests", n)
	}

	// Another file under the URL's name is not used: the download is.
	if err := os.WriteFile(filepath.Join(dir, "vmlinuz"), []byte("another kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Inputs(context.Background(), spec, lock, openCache(t), opts); err != nil {
		t.Fatal(err)
	}
	if log.n() == 0 {
		t.Error("a copy with another sha256 was used")
	}

	// Unreachable: the error says what would do instead.
	spec, lock = urlImage("https://127.0.0.1:1/dl/vmlinuz", sha)
	spec.Kernel.Source.Vars = []string{"kernel_url"}
	_, err = Inputs(context.Background(), spec, lock, openCache(t), Options{HTTPClient: tlsClient(srv)})
	if err == nil {
		t.Fatal("an unreachable URL was fetched")
	}
	for _, want := range []string{"var.kernel_url", "SBX_VAR_kernel_url", mirror.EnvVar, sha} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}
