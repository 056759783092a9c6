package e2etest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx"
	"github.com/sbx-dev/sbx/internal/build/debrepo"
)

const packagesSpec = `image "dev" {
  platform = "linux/amd64"
  size     = "1GiB"

  kernel {
    source = "file:./kernel.deb"
    file   = "boot/vmlinuz-*"
  }

  packages    = ["git", "ca-certificates"]
  executables = ["git"]

  user "agent" {
    uid = 1000
  }
}

sandbox "dev" {
  image  = image.dev
  user   = "agent"
  cpus   = 1
  memory = "512MiB"
}
`

// TestPackagesInVM locks git and ca-certificates with their closure from
// the host's apt sources, builds the image, boots it and, as the
// sandbox's non-root user, runs git --version and clones a local
// repository; the CA bundle is there.
func TestPackagesInVM(t *testing.T) {
	srcs, err := debrepo.HostSources("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) == 0 {
		t.Skip("the host has no apt sources")
	}
	cfgDir := t.TempDir()
	if err := os.Link(filepath.Join(dir, "kernel.deb"), filepath.Join(cfgDir, "kernel.deb")); err != nil {
		data, rerr := os.ReadFile(filepath.Join(dir, "kernel.deb"))
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err := os.WriteFile(filepath.Join(cfgDir, "kernel.deb"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "sbx.hcl"), []byte(packagesSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cfg, err := sbx.Load(cfgDir, sbx.Options{Environ: environ})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sbx.Start(ctx, cfg, "dev", sbx.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop(context.Background())
	var out, errOut bytes.Buffer
	st, err := sb.Exec(ctx, sbx.Cmd{
		Args: []string{"sh", "-c", `set -e
id -un
git --version
git init -q /tmp/src && cd /tmp/src
git -c user.name=t -c user.email=t@test.invalid commit -q --allow-empty -m first
git clone -q /tmp/src /tmp/dst && git -C /tmp/dst log --format=%s
test -s /etc/ssl/certs/ca-certificates.crt && echo bundle`},
		Stdout: &out,
		Stderr: &errOut,
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", st.Code, out.String(), errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || lines[0] != "agent" || !strings.HasPrefix(lines[1], "git version 2.") || lines[2] != "first" || lines[3] != "bundle" {
		t.Fatalf("output:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
}
