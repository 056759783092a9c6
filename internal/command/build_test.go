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
	"time"

	"github.com/sbx-dev/sbx/internal/build/agentbin"
	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/archive/archivetest"
	"github.com/sbx-dev/sbx/internal/build/gondolin"
	"github.com/sbx-dev/sbx/internal/build/kernel"
	"github.com/sbx-dev/sbx/internal/build/kernel/kerneltest"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// testKernelDeb writes a small kernel package: an image, one module file
// and every module sbx guests load listed as built in. Booting is tested
// with the real kernel in internal/build/image; the command needs only a kernel
// package that package kernel reads.
func testKernelDeb(t *testing.T, path string) {
	t.Helper()
	const ver = "6.1.0-test-amd64"
	var builtin strings.Builder
	for _, m := range kernel.DefaultModules {
		builtin.WriteString("kernel/builtin/" + m + ".ko\n")
	}
	deb := archivetest.Deb(t, "Package: linux-image-test\nVersion: 1\nArchitecture: amd64\n", archive.Xz,
		archivetest.Entry{Name: "boot/vmlinuz-" + ver, Body: "a kernel image\n"},
		archivetest.Entry{Name: "lib/modules/" + ver + "/modules.builtin", Body: builtin.String()},
		archivetest.Entry{Name: "lib/modules/" + ver + "/kernel/drivers/dummy.ko",
			Body: string(kerneltest.ModuleObject(t, "dummy", "name=dummy"))},
	)
	if err := os.WriteFile(path, deb, 0o644); err != nil {
		t.Fatal(err)
	}
}

// buildSpec is a hermetic image: a base from the fixture's registry, an
// npm artifact, a local file and a local kernel package.
func (f *fixture) buildSpec() string {
	return `image "box" {
  platform = "linux/amd64"
  base     = "` + f.reg + `/test/base:v1"
  size     = "16MiB"

  kernel {
    source = "file:./kernel.deb"
    file   = "boot/vmlinuz-*"
  }

  artifact "tool" {
    source = "npm:@acme/tool@1.0.0"
    file   = "package/bin/tool"
    dest   = "/usr/local/bin/tool"
    mode   = "0755"
  }

  artifact "data" {
    source = "file:./data.txt"
    dest   = "/etc/data.txt"
  }

  user "agent" {
    uid = 1000
  }
}
`
}

func TestBuild(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	agent, err := agentbin.Build(ctx, lang.Platform{OS: "linux", Architecture: "amd64"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cacheDir := t.TempDir()
	f.environ = append(f.environ, "SBX_CACHE_DIR="+cacheDir, agentbin.EnvVar+"="+agent, "SOURCE_DATE_EPOCH=1700000000")

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.hcl"), f.buildSpec())
	writeFile(t, filepath.Join(dir, "data.txt"), "data\n")
	testKernelDeb(t, filepath.Join(dir, "kernel.deb"))
	lockPath := filepath.Join(dir, lockfiles.FileName)

	// No lock yet: build locks first, then records the output hashes.
	r := f.mustRun(ExitOK, "build", dir)
	t.Logf("first build:\n%s", r)
	for _, want := range []string{"Created " + lockPath, "image.box: built", "Recorded the output hashes"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r)
		}
	}
	for _, want := range []string{"image.box: fetching…", "image.box: writing ext4…", "image.box: qcow2…"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks the stage line %q:\n%s", want, r)
		}
	}
	lock, diags := lockfiles.Read(lockPath)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	outputs := lock.Lookup("box").Outputs
	if len(outputs) != 3 {
		t.Fatalf("the lock records outputs %v, want kernel, initramfs and disk", outputs)
	}
	for name, digest := range outputs {
		line := outputLine(r.stdout, name)
		if line == nil || line[1] != digest {
			t.Errorf("stdout does not show output %s with digest %s:\n%s", name, digest, r)
			continue
		}
		if !strings.HasPrefix(line[0], cacheDir) {
			t.Errorf("output %s at %s, not in the cache %s", name, line[0], cacheDir)
		}
		if got := fileDigest(t, line[0]); got != digest {
			t.Errorf("output %s hashes to %s, the lock records %s", name, got, digest)
		}
	}
	locked := readFile(t, lockPath)

	// CI: the lock is read-only and the build is a cache hit.
	r = f.mustRun(ExitOK, "build", "-lockfile=readonly", dir)
	if !strings.Contains(r.stdout, "image.box: cached") || !strings.Contains(r.stderr, "found in the cache") {
		t.Errorf("the second build was not a cache hit:\n%s", r)
	}
	if strings.Contains(r.stderr, "fetching") {
		t.Errorf("the cached build fetched:\n%s", r)
	}

	// A cold cache rebuilds to the recorded bytes.
	saved := append([]string(nil), f.environ...)
	f.environ = append(f.environ, "SBX_CACHE_DIR="+t.TempDir())
	r = f.mustRun(ExitOK, "build", "-lockfile=readonly", dir)
	if !strings.Contains(r.stdout, "image.box: built") {
		t.Errorf("a cold cache did not build:\n%s", r)
	}
	f.environ = saved

	r = f.mustRun(ExitOK, "build", "-verify", dir)
	if !strings.Contains(r.stdout, "verified") || !strings.Contains(r.stderr, "verifying…") {
		t.Errorf("-verify did not rebuild and verify:\n%s", r)
	}
	if !bytes.Equal(readFile(t, lockPath), locked) {
		t.Error("builds that matched the lock changed it")
	}

	// Another recorded disk hash: read-only builds and -verify fail and
	// name it; nothing is written.
	wrong := "sha256:" + strings.Repeat("0", 64)
	tampered := strings.Replace(string(locked), outputs["disk"], wrong, 1)
	writeFile(t, lockPath, tampered)
	r = f.mustRun(ExitError, "build", "-lockfile=readonly", dir)
	for _, want := range []string{"image.box output disk", wrong, outputs["disk"], "-lockfile=readonly"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r)
		}
	}
	r = f.mustRun(ExitError, "build", "-verify", "-lockfile=readonly", dir)
	if !strings.Contains(r.stderr, "image.box is not reproducible: disk differ") || !strings.Contains(r.stderr, wrong) {
		t.Errorf("-verify against another recorded hash:\n%s", r)
	}
	if string(readFile(t, lockPath)) != tampered {
		t.Error("a failed read-only build wrote the lock file")
	}
	// Without -lockfile=readonly the build records what it made.
	r = f.mustRun(ExitOK, "build", dir)
	if !strings.Contains(r.stdout, "did not rebuild to the recorded bytes") || !bytes.Equal(readFile(t, lockPath), locked) {
		t.Errorf("the build did not record its hashes again:\n%s", r)
	}

	// A lock that records no outputs cannot pass a read-only build.
	bare, _ := lockfiles.Read(lockPath)
	bare.Images["box"].Outputs = nil
	if err := lockfiles.Write(lockPath, bare); err != nil {
		t.Fatal(err)
	}
	r = f.mustRun(ExitError, "build", "-lockfile=readonly", dir)
	if !strings.Contains(r.stderr, "the lock records no hash") {
		t.Errorf("a read-only build against a lock without outputs:\n%s", r)
	}
	f.mustRun(ExitOK, "build", dir)
	if !bytes.Equal(readFile(t, lockPath), locked) {
		t.Error("the build did not record its hashes in a lock without outputs")
	}

	// Outputs copied to a directory, and the Gondolin export.
	out := filepath.Join(t.TempDir(), "out")
	r = f.mustRun(ExitOK, "build", "-o", out, dir, "box")
	if line := outputLine(r.stdout, "disk"); line == nil || line[0] != filepath.Join(out, "disk.qcow2") || fileDigest(t, line[0]) != outputs["disk"] {
		t.Errorf("-o did not copy the disk to %s:\n%s", out, r)
	}
	assets := filepath.Join(t.TempDir(), "assets")
	r = f.mustRun(ExitOK, "build", "-format", "gondolin", "-o", assets, dir)
	if err := gondolin.Verify(assets); err != nil {
		t.Errorf("the Gondolin export does not verify: %v\n%s", err, r)
	}

	// Usage errors.
	r = f.mustRun(ExitError, "build", dir, "nope")
	if !strings.Contains(r.stderr, `No image "nope"`) || !strings.Contains(r.stderr, "box") {
		t.Errorf("an unknown image:\n%s", r)
	}
	r = f.mustRun(ExitError, "build", "-format", "gondolin", dir)
	if !strings.Contains(r.stderr, "needs -o") {
		t.Errorf("gondolin without -o:\n%s", r)
	}
	f.environ = append(f.environ, "SOURCE_DATE_EPOCH=yesterday")
	r = f.mustRun(ExitError, "build", dir)
	if !strings.Contains(r.stderr, "SOURCE_DATE_EPOCH") {
		t.Errorf("a bad SOURCE_DATE_EPOCH:\n%s", r)
	}
}

// outputLine finds "  NAME  PATH  DIGEST" in build output and returns
// the path and digest.
func outputLine(stdout, name string) []string {
	for line := range strings.Lines(stdout) {
		fields := strings.Fields(line)
		if len(fields) == 3 && fields[0] == name {
			return fields[1:]
		}
	}
	return nil
}

func fileDigest(t *testing.T, path string) string {
	t.Helper()
	sum := sha256.Sum256(readFile(t, path))
	return "sha256:" + hex.EncodeToString(sum[:])
}
