package agentbin_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"

	"github.com/sbx-dev/sbx/internal/build/agentbin"
	"github.com/sbx-dev/sbx/internal/build/cache"
)

// moduleRoot is the root of the sbx source tree the tests run in.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// readmeBuild builds the agent for linux/amd64 with the command the
// documentation prints (BuildCommand), through the shell, from the source
// tree, and returns its bytes: the reference every other way of getting
// the agent must reproduce.
func readmeBuild(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "agent")
	line := agentbin.BuildCommand(amd64)
	line = strings.Replace(line, "-o "+agentbin.Name(amd64), "-o "+out, 1)
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = moduleRoot(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// With $SBX_GUEST_AGENT unset and nothing beside the executable, Find
// builds the agent from the source tree into the cache, and its bytes
// are those of the documented reproducible build.
func TestFindBuildsFromSource(t *testing.T) {
	root := t.TempDir()
	t.Setenv(agentbin.EnvVar, "")
	t.Setenv(cache.EnvRoot, root)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{agentbin.Name(amd64), "sbx-guest"} {
		if _, err := os.Stat(filepath.Join(filepath.Dir(exe), name)); err == nil {
			t.Fatalf("%s is beside the test binary", name)
		}
	}
	got, err := agentbin.Find(amd64)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, filepath.Join(root, "agent")+string(filepath.Separator)) {
		t.Errorf("Find = %s, want a file under %s/agent", got, root)
	}
	found, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	want := readmeBuild(t)
	if !bytes.Equal(found, want) {
		t.Fatalf("the agent Find built (%d bytes, sha256 %x) is not the documented build (%d bytes, sha256 %x)",
			len(found), sha256.Sum256(found), len(want), sha256.Sum256(want))
	}
	// Found again, it is the same file with the same bytes.
	again, err := agentbin.Find(amd64)
	if b, _ := os.ReadFile(again); err != nil || again != got || !bytes.Equal(b, want) {
		t.Errorf("second Find = %s, %v", again, err)
	}
	// Nothing but the agent is left in its directory.
	if entries, _ := os.ReadDir(filepath.Dir(got)); len(entries) != 1 {
		t.Errorf("%s holds %d entries, want 1", filepath.Dir(got), len(entries))
	}
}

// A released sbx (one built from a module version, without its source
// tree) builds the agent of its own version through the module proxy, and
// gets the same bytes as a build from a source tree of that version. The
// proxy here is a directory: the source tree zipped as a module version,
// in front of this machine's module cache.
func TestBuildVersionThroughProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED in -short mode: builds the agent twice")
	}
	const version = "v0.99.0"
	goEnv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	realCache := goEnv("GOMODCACHE")
	proxy := t.TempDir()
	at := filepath.Join(proxy, "github.com", "sbx-dev", "sbx", "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	root := moduleRoot(t)
	var zip bytes.Buffer
	if err := modzip.CreateFromDir(&zip, module.Version{Path: "github.com/sbx-dev/sbx", Version: version}, root); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": []byte(`{"Version":"` + version + `","Time":"2026-01-01T00:00:00Z"}`),
		version + ".mod":  gomod,
		version + ".zip":  zip.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	modCache := t.TempDir()
	t.Cleanup(func() {
		// The go command writes the module cache read-only.
		c := exec.Command("go", "clean", "-modcache")
		c.Env = append(os.Environ(), "GOMODCACHE="+modCache)
		c.Run()
	})
	t.Setenv("GOMODCACHE", modCache)
	t.Setenv("GOPROXY", "file://"+proxy+",file://"+filepath.Join(realCache, "cache", "download"))
	t.Setenv("GOSUMDB", "off")
	t.Setenv("GOTOOLCHAIN", "local")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	b := agentbin.Builder{Version: version}
	got, err := b.Cached(ctx, amd64, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, filepath.Join(dir, version)+string(filepath.Separator)) {
		t.Errorf("Cached = %s, want a file under %s/%s/GOVERSION", got, dir, version)
	}
	fromVersion, _ := os.ReadFile(got)
	fromTree := readmeBuild(t)
	if len(fromVersion) == 0 || !bytes.Equal(fromVersion, fromTree) {
		t.Fatalf("the agent of %s (%d bytes, sha256 %x) is not the source tree's (%d bytes, sha256 %x)",
			version, len(fromVersion), sha256.Sum256(fromVersion), len(fromTree), sha256.Sum256(fromTree))
	}
	// Kept: asked again, it is not built again (the proxy is gone).
	fi, _ := os.Stat(got)
	os.RemoveAll(proxy)
	again, err := b.Cached(ctx, amd64, dir)
	fi2, _ := os.Stat(again)
	if err != nil || again != got || !os.SameFile(fi, fi2) {
		t.Errorf("second Cached = %s, %v; want the kept %s", again, err, got)
	}
	// A version no proxy has is an error naming it.
	_, err = agentbin.Builder{Version: "v0.98.0"}.Cached(ctx, amd64, dir)
	if err == nil || !strings.Contains(err.Error(), "downloading github.com/sbx-dev/sbx@v0.98.0 with the go command") ||
		errors.Is(err, agentbin.ErrCannotBuild) {
		t.Errorf("a missing version: %v", err)
	}
}
