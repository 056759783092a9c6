package command

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLockFromMirrorDir checks the way to satisfy a pinned URL input
// whose host cannot be reached without editing the spec: a copy with the
// declared sha256 in the directory $SBX_MIRROR_DIR names. Without it the
// error names the variable behind the URL and the directory option; with
// it the lock pins the spec's own URL, and the plan has no new input and
// no widening. Nothing is added to the configuration directory.
func TestLockFromMirrorDir(t *testing.T) {
	body := []byte("tool release tarball")
	h := sha256.Sum256(body)
	sum := hex.EncodeToString(h[:])
	const url = "https://127.0.0.1:1/releases/tool_linux_amd64.tar.gz"
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.hcl"), `variable "tool_url" {
  default = "`+url+`"
}
variable "tool_sha256" {
  type = string
}
image "u" {
  artifact "tool" {
    source = var.tool_url
    sha256 = var.tool_sha256
    file   = "tool"
    dest   = "/usr/local/bin/tool"
  }
}
sandbox "box" {
  image = image.u
}
`)
	mirror := t.TempDir()
	writeFile(t, filepath.Join(mirror, "tool_linux_amd64.tar.gz"), string(body))
	base := []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "SBX_VAR_tool_sha256=" + sum, "SBX_CACHE_DIR=" + t.TempDir()}
	run := func(environ []string, args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := Run(args, &Env{Stdout: &stdout, Stderr: &stderr, Environ: environ, Context: context.Background()})
		return code, stdout.String(), stderr.String()
	}

	code, _, stderr := run(base, "lock", dir)
	if code != ExitError {
		t.Fatalf("lock of an unreachable URL: exit %d", code)
	}
	for _, want := range []string{"var.tool_url", "SBX_VAR_tool_url", "SBX_MIRROR_DIR", sum, "tool_linux_amd64.tar.gz"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("lock of an unreachable URL does not say %q:\n%s", want, stderr)
		}
	}

	withMirror := append(base, "SBX_MIRROR_DIR="+mirror)
	code, stdout, stderr := run(withMirror, "lock", dir)
	if code != ExitOK || !strings.Contains(stdout, url+" → sha256:"+sum) {
		t.Fatalf("lock with the copy in SBX_MIRROR_DIR: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = run(base, "plan", dir)
	if code != ExitOK || !strings.Contains(stdout, "0 widening") {
		t.Errorf("plan after locking from the mirror: exit %d\n%s%s", code, stdout, stderr)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "main.hcl sbx.lock.hcl" {
		t.Errorf("the configuration directory holds %v, want only the spec and the lock", names)
	}

	// A copy with other content is not used.
	writeFile(t, filepath.Join(mirror, "tool_linux_amd64.tar.gz"), "another release")
	os.Remove(filepath.Join(dir, "sbx.lock.hcl"))
	if code, _, stderr = run(withMirror, "lock", dir); code != ExitError || !strings.Contains(stderr, "holds no copy whose sha256 is "+sum) {
		t.Errorf("lock with another file in SBX_MIRROR_DIR: exit %d\n%s", code, stderr)
	}
}
