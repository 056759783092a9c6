package localsrc_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sbx-dev/sbx/internal/build/localsrc"
	"github.com/sbx-dev/sbx/lang"
)

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fileSource(ref string) *lang.Source {
	return &lang.Source{Kind: lang.SourceFile, Raw: "file:" + ref, Ref: ref}
}

// A checkout plants symbolic links to a secret outside the configuration
// directory, directly and through a linked directory: OpenFile refuses
// both, while a link that stays inside the directory is followed.
func TestOpenFileStaysInside(t *testing.T) {
	top := t.TempDir()
	secret := filepath.Join(top, "home", ".ssh", "id_ed25519")
	write(t, secret, "PRIVATE KEY")
	cfg := filepath.Join(top, "config")
	write(t, filepath.Join(cfg, "files", "motd"), "hello\n")
	for link, target := range map[string]string{
		"key":          secret,
		"sshdir":       filepath.Dir(secret),
		"up":           "../home/.ssh/id_ed25519",
		"files/inside": "motd",
	} {
		if err := os.Symlink(target, filepath.Join(cfg, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, ref := range []string{"key", "sshdir/id_ed25519", "up", "../home/.ssh/id_ed25519"} {
		f, _, err := localsrc.OpenFile(cfg, fileSource(ref))
		if err == nil {
			b, _ := io.ReadAll(f)
			f.Close()
			t.Errorf("file:%s opened, read %q", ref, b)
			continue
		}
		if strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("file:%s: error leaks the content: %v", ref, err)
		}
	}
	f, path, err := localsrc.OpenFile(cfg, fileSource("files/inside"))
	if err != nil {
		t.Fatalf("a link inside the directory: %v", err)
	}
	defer f.Close()
	if b, _ := io.ReadAll(f); string(b) != "hello\n" || path != filepath.Join(cfg, "files", "inside") {
		t.Errorf("read %q at %s", b, path)
	}
}

// A layout whose blob is a symbolic link to a host file cannot serve it.
func TestLayoutBlobStaysInside(t *testing.T) {
	top := t.TempDir()
	secret := filepath.Join(top, "secret")
	write(t, secret, "PRIVATE KEY")
	cfg := filepath.Join(top, "config")
	write(t, filepath.Join(cfg, "layout", "index.json"), `{"schemaVersion":2,"manifests":[]}`)
	h := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	blob := filepath.Join(cfg, "layout", "blobs", "sha256", h.Hex)
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, blob); err != nil {
		t.Fatal(err)
	}
	l, err := localsrc.OpenLayout(cfg, &lang.Source{Kind: lang.SourceOCILayout, Raw: "oci-layout:layout", Ref: "layout"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Index(); err != nil {
		t.Fatal(err)
	}
	rc, err := l.Blob(h)
	if err == nil {
		b, _ := io.ReadAll(rc)
		rc.Close()
		t.Fatalf("the planted blob was read: %q", b)
	}
	if !strings.Contains(err.Error(), "outside the layout directory") {
		t.Errorf("err = %v, want it to say the blob leads outside", err)
	}
	// A digest is a file name only when it is sha256 hex.
	for _, bad := range []v1.Hash{
		{Algorithm: "sha256", Hex: "../../../secret"},
		{Algorithm: "sha256", Hex: strings.Repeat("AB", 32)},
		{Algorithm: "sha512", Hex: strings.Repeat("ab", 64)},
	} {
		if rc, err := l.Blob(bad); err == nil {
			rc.Close()
			t.Errorf("Blob(%s) opened", bad)
		}
	}
}
