package command

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/agentbin"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// sbx push publishes a build to a registry (the fixture's, in process),
// sbx pull brings it into an empty cache, and a build there is then a
// cache hit; a lock that records other outputs is refused with nothing
// stored.
func TestPushPull(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	agent, err := agentbin.Build(ctx, lang.Platform{OS: "linux", Architecture: "amd64"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	base := append(f.environ, agentbin.EnvVar+"="+agent, "SOURCE_DATE_EPOCH=1700000000")
	builder, puller := t.TempDir(), t.TempDir()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.hcl"), f.buildSpec())
	writeFile(t, filepath.Join(dir, "data.txt"), "data\n")
	testKernelDeb(t, filepath.Join(dir, "kernel.deb"))

	f.environ = append(base, "SBX_CACHE_DIR="+builder)
	r := f.mustRun(ExitOK, "push", dir, "box", f.reg+"/team/box")
	var ref string
	for _, line := range strings.Split(r.stdout, "\n") {
		if s := strings.TrimSpace(line); strings.HasPrefix(s, f.reg+"/team/box@sha256:") {
			ref = s
		}
	}
	if ref == "" || !strings.Contains(r.stdout, "image.box: pushed") {
		t.Fatalf("push printed no reference by digest:\n%s", r)
	}

	f.environ = append(base, "SBX_CACHE_DIR="+puller)
	r = f.mustRun(ExitOK, "pull", dir, "box", ref)
	if !strings.Contains(r.stdout, "image.box: pulled into the cache") || strings.Contains(r.stderr, "other bytes") {
		t.Errorf("pull:\n%s", r)
	}
	r = f.mustRun(ExitOK, "build", "-lockfile=readonly", dir)
	if !strings.Contains(r.stdout, "image.box: cached") {
		t.Errorf("the build after a pull was not a cache hit:\n%s", r)
	}

	// A lock that names another disk: refused, nothing stored.
	lockPath := filepath.Join(dir, lockfiles.FileName)
	lock, diags := lockfiles.Read(lockPath)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	disk := lock.Lookup("box").Outputs["disk"]
	other := "sha256:" + strings.Repeat("0", 64)
	b, err := os.ReadFile(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, lockPath, strings.ReplaceAll(string(b), disk, other))
	empty := t.TempDir()
	f.environ = append(base, "SBX_CACHE_DIR="+empty)
	r = f.mustRun(ExitError, "pull", dir, "box", ref)
	if !strings.Contains(r.stderr, "is not the build the lock file records: its output disk is "+disk) || !strings.Contains(r.stderr, "Nothing was stored") {
		t.Errorf("a pull against another lock:\n%s", r)
	}
	if outs, _ := filepath.Glob(filepath.Join(empty, "outputs", "*", "*")); len(outs) > 0 {
		t.Errorf("a refused pull stored %v", outs)
	}

	// Wrong arguments say what pull takes.
	r = f.mustRun(ExitError, "pull", dir)
	if !strings.Contains(r.stderr, "[DIR] IMAGE REF") {
		t.Errorf("pull DIR:\n%s", r)
	}
}
