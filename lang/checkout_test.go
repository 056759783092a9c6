//go:build unix

package lang

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

// These tests play an untrusted checkout: every file and link in the
// configuration directory is written by whoever wrote the repository, and
// sbx plan runs on it (on CI, printing diagnostics into a job log).

const validSpec = "image \"agent\" {\n  base = \"alpine:3.23\"\n}\n"

// render prints diagnostics the way the CLI does, with source snippets.
func render(t *testing.T, cfg *Config, diags hcl.Diagnostics) string {
	t.Helper()
	var buf bytes.Buffer
	w := hcl.NewDiagnosticTextWriter(&buf, cfg.Sources, 100, false)
	if err := w.WriteDiagnostics(diags); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// loadDiag loads dir and returns the rendered diagnostics, failing unless
// there is an error whose detail names file and contains want.
func loadDiag(t *testing.T, dir, file, want string) string {
	t.Helper()
	done := make(chan struct{})
	var (
		cfg   *Config
		diags hcl.Diagnostics
	)
	go func() {
		defer close(done)
		cfg, diags = Load(dir, Options{})
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("Load of %s blocked", dir)
	}
	out := render(t, cfg, diags)
	path := filepath.Join(dir, file)
	for _, d := range diags {
		if d.Severity == hcl.DiagError && strings.Contains(d.Detail, path) && strings.Contains(d.Detail, want) {
			return out
		}
	}
	t.Errorf("no error naming %s and saying %q; got:\n%s", path, want, out)
	return out
}

// outsideFile writes content to a file outside any configuration
// directory.
func outsideFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigLinkOutsideIsNotRead(t *testing.T) {
	const secret = "ghp_0123456789SECRET"
	for name, content := range map[string]string{
		// Valid HCL: it would decode, and "Unsupported argument" quotes
		// the line.
		"valid HCL": "GITHUB_TOKEN = \"" + secret + "\"\n",
		// Not HCL: the syntax error quotes the line.
		"invalid HCL": "export GITHUB_TOKEN=" + secret + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := writeDir(t, map[string]string{"main.hcl": validSpec})
			if err := os.Symlink(outsideFile(t, content), filepath.Join(dir, "x.hcl")); err != nil {
				t.Fatal(err)
			}
			out := loadDiag(t, dir, "x.hcl", "outside the configuration directory")
			if strings.Contains(out, secret) {
				t.Errorf("the diagnostics quote the file outside:\n%s", out)
			}
		})
	}
}

func TestConfigLinkToProcIsNotRead(t *testing.T) {
	environ, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		t.Skipf("no /proc/self/environ: %v", err)
	}
	dir := writeDir(t, map[string]string{"main.hcl": validSpec})
	if err := os.Symlink("/proc/self/environ", filepath.Join(dir, "env.hcl")); err != nil {
		t.Fatal(err)
	}
	out := loadDiag(t, dir, "env.hcl", "outside the configuration directory")
	for _, kv := range bytes.Split(environ, []byte{0}) {
		_, v, _ := bytes.Cut(kv, []byte("="))
		if len(v) >= 8 && strings.Contains(out, string(v)) {
			t.Errorf("the diagnostics quote the environment (%s):\n%s", kv[:bytes.IndexByte(kv, '=')], out)
		}
	}
}

func TestConfigLinkThroughOutsideDirectory(t *testing.T) {
	// A link to a directory outside, then a file name under it.
	const secret = "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI"
	outside := filepath.Dir(outsideFile(t, secret))
	dir := writeDir(t, map[string]string{"main.hcl": validSpec})
	if err := os.Symlink(outside, filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("up/.env", filepath.Join(dir, "x.hcl")); err != nil {
		t.Fatal(err)
	}
	if out := loadDiag(t, dir, "x.hcl", "outside the configuration directory"); strings.Contains(out, "wJalrXUtnFEMI") {
		t.Errorf("the diagnostics quote the file outside:\n%s", out)
	}
}

func TestConfigNamedPipeIsRefused(t *testing.T) {
	dir := writeDir(t, map[string]string{"main.hcl": validSpec})
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.hcl"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("pipe", filepath.Join(dir, "link.hcl")); err != nil {
		t.Fatal(err)
	}
	loadDiag(t, dir, "fifo.hcl", "not a regular file (a named pipe)")
	loadDiag(t, dir, "link.hcl", "not a regular file (a named pipe)")
}

func TestConfigDanglingLinkIsAnError(t *testing.T) {
	dir := writeDir(t, map[string]string{"main.hcl": validSpec})
	if err := os.Symlink("gone.txt", filepath.Join(dir, "x.hcl")); err != nil {
		t.Fatal(err)
	}
	loadDiag(t, dir, "x.hcl", `symbolic link to "gone.txt", which does not exist`)
}

// A link that stays inside the configuration directory is followed.
func TestConfigLinkInsideIsRead(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"main.hcl":          validSpec,
		"shared/extra.conf": "image \"other\" {\n  base = \"alpine:3.23\"\n}\n",
	})
	if err := os.Symlink("shared/extra.conf", filepath.Join(dir, "extra.hcl")); err != nil {
		t.Fatal(err)
	}
	cfg := mustLoad(t, dir, Options{})
	if cfg.Images["other"] == nil {
		t.Errorf("the linked file was not read: images %v", keys(cfg.Images))
	}
}
