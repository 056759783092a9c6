package command

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/proto/imageinfo"
)

// TestShowImage: "sbx show" of a built image's image.json lists its
// outputs and inventory, escaped, and -json gives the manifest back.
func TestShowImage(t *testing.T) {
	m := image.Manifest{
		Version: image.ManifestVersion, Image: "dev", Platform: "linux/amd64", InputHash: "sha256:aa", BuildKey: "sha256:bb",
		FormatVersion: image.FormatVersion, KernelVersion: "6.1.0-57-amd64",
		Outputs:     map[string]image.ManifestOutput{"disk": {File: "disk.qcow2", Digest: "sha256:cc", Size: 1}},
		Packages:    []imageinfo.Package{{Name: "git", Version: "1:2.39.5-0+deb12u2", Architecture: "amd64"}, {Name: "evil\x1b[2J", Version: "1", Architecture: "all"}},
		Executables: []imageinfo.Executable{{Name: "git", Path: "/usr/bin/git"}},
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "image.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	show := func(args ...string) string {
		var stdout, stderr bytes.Buffer
		if code := Run(append([]string{"show"}, args...), &Env{Stdout: &stdout, Stderr: &stderr, Context: context.Background()}); code != ExitOK {
			t.Fatalf("show %v: exit %d: %s", args, code, stderr.String())
		}
		return stdout.String()
	}
	out := show(path)
	for _, want := range []string{"image.dev", "6.1.0-57-amd64", "disk.qcow2", "packages (2)", "git 1:2.39.5-0+deb12u2 amd64", "executables (1)", "git  /usr/bin/git"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("show printed a control character: %q", out)
	}
	var back image.Manifest
	if err := json.Unmarshal([]byte(show("-json", path)), &back); err != nil || len(back.Packages) != 2 || back.Executables[0].Path != "/usr/bin/git" {
		t.Errorf("show -json: %+v, %v", back, err)
	}
}
