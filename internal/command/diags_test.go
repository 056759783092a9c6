package command

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildErrorShowsItsBlock: a build that fails on a spec block is
// printed as a spec error is, with the block's position and snippet,
// rather than with a "file:line: " in its text.
func TestBuildErrorShowsItsBlock(t *testing.T) {
	dir := t.TempDir()
	spec := "image \"nok\" {\n  platform = \"linux/amd64\"\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "sbx.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Run([]string{"build", "-no-color", dir}, &Env{
		Stdout: &stdout, Stderr: &stderr, Context: context.Background(),
		Environ: []string{"HOME=" + t.TempDir(), "SBX_CACHE_DIR=" + t.TempDir()},
	})
	out := stderr.String()
	if code != ExitError {
		t.Fatalf("exit %d, want %d\n%s%s", code, ExitError, stdout.String(), out)
	}
	for _, want := range []string{
		"Error: Cannot build image.nok",
		`sbx.hcl line 1, in image "nok":`,
		`1: image "nok" {`,
		`image "nok" has no kernel source`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "sbx.hcl:1:") {
		t.Errorf("the position is printed in the text too:\n%s", out)
	}
}
