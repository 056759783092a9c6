package e2etest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sbx-dev/sbx"
	"github.com/sbx-dev/sbx/internal/build/debrepo"
)

// requireDebianGit skips the test when the host has no apt sources to
// build an image with Debian's packages from, and fails it when the
// host has no git of its own.
func requireDebianGit(t *testing.T) {
	t.Helper()
	srcs, err := debrepo.HostSources("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) == 0 {
		t.Skip("the host has no apt sources")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed on the host: %v", err)
	}
}

// vmConfigDir makes a configuration directory holding the fixture's
// files names (hard links, or copies where a link cannot be made) and
// the spec at specPath as its sbx.hcl.
func vmConfigDir(t *testing.T, specPath string, names ...string) string {
	t.Helper()
	cfgDir := t.TempDir()
	for _, name := range names {
		if err := os.Link(filepath.Join(dir, name), filepath.Join(cfgDir, name)); err != nil {
			data, rerr := os.ReadFile(filepath.Join(dir, name))
			if rerr != nil {
				t.Fatal(rerr)
			}
			if err := os.WriteFile(filepath.Join(cfgDir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	spec, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "sbx.hcl"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgDir
}

// buildGuestTool builds the Go package pkg for the guest as out, within
// two minutes.
func buildGuestTool(t *testing.T, pkg, out string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", filepath.Base(pkg), err, b)
	}
}

// startVM loads cfgDir and starts its sandbox name through the Go API,
// logging how long building and booting took. The context it returns,
// for all the test does with the sandbox, ends after timeout; the
// sandbox is stopped when the test ends.
func startVM(t *testing.T, cfgDir, name string, timeout time.Duration) (context.Context, *sbx.Sandbox) {
	t.Helper()
	return startVMWith(t, cfgDir, name, timeout, sbx.StartOptions{})
}

// startVMWith is startVM with opts.
func startVMWith(t *testing.T, cfgDir, name string, timeout time.Duration, opts sbx.StartOptions) (context.Context, *sbx.Sandbox) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	cfg, err := sbx.Load(cfgDir, sbx.Options{Environ: environ})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sb, err := sbx.Start(ctx, cfg, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Stop(context.Background()) })
	t.Logf("built and booted in %v", time.Since(start).Round(time.Second))
	return ctx, sb
}

// guestExec runs c in sb within timeout of ctx and returns what it wrote
// to stdout and stderr and its exit code (-1 with the error when it
// could not be run).
func guestExec(ctx context.Context, sb *sbx.Sandbox, timeout time.Duration, c sbx.Cmd) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	st, err := sb.Exec(ctx, c)
	if err != nil {
		return out.String(), -1, err
	}
	return out.String(), st.Code, nil
}
