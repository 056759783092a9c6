//go:build unix

package lang

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// TestEgressCANamedPipe plays a checkout whose ca names a named pipe,
// directly or through a link inside the directory: opening a pipe for
// reading waits for a writer, so a loader that opened it blindly would
// hang sbx plan. Each must be refused at once as not a regular file.
func TestEgressCANamedPipe(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"image.hcl": egressImage,
		"main.hcl": "egress \"corp\" {\n  allow = [\"api.example.com\"]\n  ca    = [\n    \"certs/fifo.pem\",\n    \"certs/link.pem\",\n  ]\n}\n" +
			"locals {\n  motd = file(\"certs/fifo.pem\")\n}\n",
	})
	if err := os.MkdirAll(filepath.Join(dir, "certs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "certs", "fifo.pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "fifo.pem", filepath.Join(dir, "certs", "link.pem"))
	done := make(chan hcl.Diagnostics, 1)
	go func() {
		_, diags := Load(dir, Options{})
		done <- diags
	}()
	var diags hcl.Diagnostics
	select {
	case diags = <-done:
	case <-time.After(20 * time.Second):
		// Unblock the loader so the test binary can finish.
		if f, err := os.OpenFile(filepath.Join(dir, "certs", "fifo.pem"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		t.Fatal("Load blocked on a named pipe")
	}
	lines := map[int]bool{}
	for _, d := range diags {
		if d.Severity == hcl.DiagError && d.Subject != nil && strings.Contains(d.Detail, "not a regular file") {
			lines[d.Subject.Start.Line] = true
		}
	}
	for _, line := range []int{4, 5, 9} {
		if !lines[line] {
			t.Errorf("no \"not a regular file\" error at main.hcl:%d; got %v", line, diags)
		}
	}
}
