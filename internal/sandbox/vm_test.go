package sandbox_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/policy"
)

func TestMain(m *testing.M) {
	code := m.Run()
	machinetest.Cleanup()
	os.Exit(code)
}

// TestWorkspaceMount boots a sandbox with a read-write workspace mount
// and checks, as the sandbox's non-root user, that it sees the host's
// tree live both ways, never a hidden file, cannot change a read-only
// path, and that its tmpfs path never reaches the host.
func TestWorkspaceMount(t *testing.T) {
	_, _, img := machinetest.Require(t)
	host := t.TempDir()
	for name, content := range map[string]string{
		"README.md":       "hello from the host\n",
		".env":            "TOKEN=sk-host-only\n",
		"keys/deploy.pem": "-----BEGIN PRIVATE KEY-----\n",
		"vendor/lib.go":   "package lib\n",
		"src/main.go":     "package main\n",
		"target/.keep":    "",
	} {
		p := filepath.Join(host, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mount := policy.Mount{Guest: "/workspace", Host: host, Access: policy.ReadWrite,
		Hide: []string{".env", "**/*.pem"}, ReadOnly: []string{"vendor"}, Tmpfs: []string{"target"}, Owner: machinetest.User}
	auth, err := ca.New()
	if err != nil {
		t.Fatal(err)
	}
	mdir, err := os.MkdirTemp("", "sbx-fs-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(mdir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	si, err := pipeline.SandboxImage(img)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.Start(ctx, sandbox.Spec{
		Name: "fs", Image: si, Memory: 512 << 20,
		Policy: policy.Sandbox{Mounts: []policy.Mount{mount}},
		Mounts: []sandboxfs.Mount{{Policy: mount, HostDir: host, UID: machinetest.UID, GID: machinetest.UID}},
	}, sandbox.Options{Dir: mdir, CA: auth})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop(context.Background())
	// The mount names no transport: on this host (Linux, amd64, QEMU
	// with vhost-user-fs-pci) it is virtio-fs (TestMountCoherence
	// runs 9P too).
	if st := sb.Started(); st.Mounts != sandboxfs.TransportVirtioFS {
		t.Errorf("the mount went over %q (%s), not virtio-fs", st.Mounts, st.MountsNote)
	}

	run := func(script string) (string, int) {
		t.Helper()
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		st, err := sb.Exec(ctx, guestconn.Cmd{Args: []string{"sh", "-c", script}, User: machinetest.User, Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatalf("%q: %v", script, err)
		}
		return out.String(), st.Code
	}

	if out, code := run("cat /workspace/README.md"); code != 0 || out != "hello from the host\n" {
		t.Errorf("reading a host file: %d %q", code, out)
	}
	if out, _ := run("ls -a /workspace /workspace/keys"); strings.Contains(out, ".env") || strings.Contains(out, "deploy.pem") {
		t.Errorf("hidden files listed:\n%s", out)
	}
	if out, code := run("cat /workspace/.env; cat /workspace/keys/deploy.pem"); code == 0 || strings.Contains(out, "sk-host-only") || strings.Contains(out, "PRIVATE") {
		t.Errorf("hidden files read: %d %q", code, out)
	}
	// Files appear owned by the sandbox's user, who writes as on a disk.
	if out, code := run("stat -c '%u:%g' /workspace/src/main.go && echo 'package main // edited' > /workspace/src/main.go && mkdir -p /workspace/new && echo made > /workspace/new/file && mv /workspace/new/file /workspace/new/renamed && chmod 600 /workspace/new/renamed"); code != 0 || !strings.HasPrefix(out, "1000:1000") {
		t.Errorf("writing as the sandbox's user: %d %q", code, out)
	}
	if b, err := os.ReadFile(filepath.Join(host, "new/renamed")); err != nil || string(b) != "made\n" {
		t.Errorf("the guest's new file on the host: %q, %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "src/main.go")); string(b) != "package main // edited\n" {
		t.Errorf("the guest's edit on the host: %q", b)
	}
	// A host edit is seen once the guest's cache of the file's
	// attributes expires (TestMountCoherence measures how soon).
	if err := os.WriteFile(filepath.Join(host, "README.md"), []byte("edited on the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := run("sleep 1.2; cat /workspace/README.md"); out != "edited on the host\n" {
		t.Errorf("a host edit read in the guest: %q", out)
	}
	// Read-only paths refuse every change; the host is untouched.
	if out, code := run("echo x > /workspace/vendor/lib.go || rm /workspace/vendor/lib.go || touch /workspace/vendor/new"); code == 0 {
		t.Errorf("changing a read-only path succeeded: %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "vendor/lib.go")); string(b) != "package lib\n" {
		t.Errorf("a read-only file changed on the host: %q", b)
	}
	// The tmpfs path starts empty, takes many files and leaves nothing
	// on the host.
	if out, code := run("ls -A /workspace/target; i=0; while [ $i -lt 200 ]; do echo $i > /workspace/target/f$i; i=$((i+1)); done; ls /workspace/target | wc -l"); code != 0 || strings.TrimSpace(out) != "200" {
		t.Errorf("the tmpfs path: %d %q", code, out)
	}
	if ents, _ := os.ReadDir(filepath.Join(host, "target")); len(ents) != 1 {
		t.Errorf("the tmpfs path reached the host: %v", ents)
	}
	// Nothing outside the mount's root, through .. or a planted link.
	if out, _ := run("ln -s /etc/passwd /workspace/link; ln -s ../../.. /workspace/up; cat /workspace/up/etc/hostname; ls /workspace/../"); strings.Contains(out, "root:") {
		t.Errorf("escaped the mount: %q", out)
	}
	if target, err := os.Readlink(filepath.Join(host, "link")); err != nil || target != "/etc/passwd" {
		t.Errorf("the planted link on the host: %q, %v (it is stored as a link, never followed)", target, err)
	}
}
