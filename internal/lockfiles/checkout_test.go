//go:build unix

package lockfiles

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// These tests play an untrusted checkout: sbx.lock.hcl is written by
// whoever wrote the repository, and sbx plan reads it.

const secretLine = "GITHUB_TOKEN = \"ghp_0123456789SECRET\"\n"

// readRendered reads path with ReadFile and Parse as sbx plan does and
// returns the diagnostics as the CLI prints them, with source snippets of
// whatever was read.
func readRendered(t *testing.T, path string) (string, hcl.Diagnostics) {
	t.Helper()
	type result struct {
		data  []byte
		diags hcl.Diagnostics
	}
	done := make(chan result, 1)
	go func() {
		data, err := ReadFile(path)
		if err != nil {
			done <- result{nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read lock file", Detail: err.Error()}}}
			return
		}
		_, diags := Parse(data, path)
		done <- result{data, diags}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("reading %s blocked", path)
	}
	var buf bytes.Buffer
	files := map[string]*hcl.File{path: {Bytes: r.data}}
	hcl.NewDiagnosticTextWriter(&buf, files, 100, false).WriteDiagnostics(r.diags)
	return buf.String(), r.diags
}

func TestReadRefusesLinkOutside(t *testing.T) {
	outside := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(outside, []byte(secretLine), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.Symlink(outside, path); err != nil {
		t.Fatal(err)
	}
	out, diags := readRendered(t, path)
	if !diags.HasErrors() {
		t.Fatal("a lock file linked to a file outside was read")
	}
	if strings.Contains(out, "SECRET") {
		t.Errorf("the diagnostics quote the file outside:\n%s", out)
	}
	if want := path + " is a symbolic link that leads outside"; !strings.Contains(out, want) {
		t.Errorf("diagnostics do not say %q:\n%s", want, out)
	}
	if _, diags := Read(path); !diags.HasErrors() {
		t.Error("Read accepted the link")
	}
}

func TestReadRefusesNamedPipe(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	out, diags := readRendered(t, path)
	if want := path + " is not a regular file"; !diags.HasErrors() || !strings.Contains(out, want) {
		t.Errorf("diagnostics do not say %q:\n%s", want, out)
	}
}

func TestReadFollowsLinkInside(t *testing.T) {
	dir := t.TempDir()
	data := Marshal(sample())
	if err := os.MkdirAll(filepath.Join(dir, "locks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "locks", "a.lock"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	if err := os.Symlink("locks/a.lock", path); err != nil {
		t.Fatal(err)
	}
	l, diags := Read(path)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if !l.Equal(sample()) {
		t.Error("the lock read through a link inside differs")
	}
}

func TestReadMissingDirectory(t *testing.T) {
	for _, path := range []string{
		filepath.Join(t.TempDir(), FileName),
		filepath.Join(t.TempDir(), "no", "such", FileName),
	} {
		if l, diags := Read(path); l != nil || diags != nil {
			t.Errorf("Read(%s) = %v, %v; want nil, nil", path, l, diags)
		}
	}
}
