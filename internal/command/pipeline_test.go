package command

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/sbx-dev/sbx"
	"github.com/sbx-dev/sbx/internal/build/agentbin"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// testAgent is the guest agent built once for the tests of this file.
var testAgent = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "sbx-command-agent-")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return agentbin.Build(ctx, lang.Platform{OS: "linux", Architecture: "amd64"}, dir)
})

// buildDir writes the build fixture's configuration (buildSpec, with its
// base in the registry at reg) into a new directory and returns it.
func (f *fixture) buildDir(reg string) string {
	f.t.Helper()
	dir := f.t.TempDir()
	writeFile(f.t, filepath.Join(dir, "main.hcl"), strings.Replace(f.buildSpec(), f.reg, reg, 1))
	writeFile(f.t, filepath.Join(dir, "data.txt"), "data\n")
	testKernelDeb(f.t, filepath.Join(dir, "kernel.deb"))
	return dir
}

// buildEnviron adds to the fixture's environment what a build needs:
// the guest agent, a fixed SOURCE_DATE_EPOCH and the cache directory.
func (f *fixture) buildEnviron(cache string) []string {
	f.t.Helper()
	agent, err := testAgent()
	if err != nil {
		f.t.Fatal(err)
	}
	return append(slices.Clone(f.environ), agentbin.EnvVar+"="+agent, "SOURCE_DATE_EPOCH=1700000000", "SBX_CACHE_DIR="+cache)
}

// The Go API and the command line build the same bytes from the same spec
// and lock, each into its own cache. The base image is in a registry over
// TLS whose certificate only the HTTP client given to both trusts: both
// must reach registries through that client, as one pipeline does.
func TestGoAPIBuildsTheBytesTheCommandBuilds(t *testing.T) {
	f := newFixture(t)
	regSrv := httptest.NewTLSServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(regSrv.Close)
	f.client.Transport.(*http.Transport).TLSClientConfig.RootCAs.AddCert(regSrv.Certificate())
	reg := strings.TrimPrefix(regSrv.URL, "https://")
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(reg + "/test/base:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithTransport(f.client.Transport)); err != nil {
		t.Fatal(err)
	}
	dir := f.buildDir(reg)

	cliCache, apiCache := t.TempDir(), t.TempDir()
	environ := f.environ
	f.environ = f.buildEnviron(cliCache)
	f.mustRun(ExitOK, "lock", dir)
	r := f.mustRun(ExitOK, "build", dir)
	lock, diags := lockfiles.Read(filepath.Join(dir, lockfiles.FileName))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	cli := lock.Lookup("box").Outputs
	if line := outputLine(r.stdout, image.OutputAgent); line != nil {
		cli[image.OutputAgent] = line[1]
	}
	if len(cli) != 4 {
		t.Fatalf("the command's build recorded outputs %v, want kernel, initramfs, disk and agent:\n%s", cli, r)
	}

	f.environ = environ
	cfg, err := sbx.Load(dir, sbx.Options{Environ: f.buildEnviron(apiCache), HTTPClient: f.client, ReadOnlyLock: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := cfg.Build(ctx, "box")
	if err != nil {
		t.Fatalf("the Go API cannot build what the command built: %v", err)
	}
	if res.Cached {
		t.Errorf("the Go API's build was a cache hit in an empty cache %s", apiCache)
	}
	for out, want := range cli {
		o := res.Outputs[out]
		if !strings.HasPrefix(o.Path, apiCache) {
			t.Errorf("the Go API's output %s is %s, not in its own cache %s", out, o.Path, apiCache)
		}
		if got := fileDigest(t, o.Path); got != want {
			t.Errorf("output %s: the Go API built %s, the command %s", out, got, want)
		}
	}
}

// stageWatcher is the standard error of an interrupted build: it
// cancels the build's context when the line of one stage is printed, and
// keeps what is printed after.
type stageWatcher struct {
	stage  string
	cancel context.CancelFunc

	mu     sync.Mutex
	before bytes.Buffer
	after  bytes.Buffer
	done   bool
}

func (w *stageWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return w.after.Write(p)
	}
	w.before.Write(p)
	if bytes.Contains(p, []byte(w.stage)) {
		w.done = true
		w.cancel()
	}
	return len(p), nil
}

// Ctrl-C in the middle of a build's kernel or initramfs step stops it in
// that step: no later stage starts, nothing is stored in the cache, the
// lock file is left as it was, and sbx exits 130 saying it was
// interrupted.
func TestBuildInterrupted(t *testing.T) {
	f := newFixture(t)
	dir := f.buildDir(f.reg)
	cache := t.TempDir()
	f.environ = f.buildEnviron(cache)
	f.mustRun(ExitOK, "lock", dir)
	lockPath := filepath.Join(dir, lockfiles.FileName)
	locked := readFile(t, lockPath)
	stages := []image.Stage{image.StageFetch, image.StageRootfs, image.StageExt4, image.StageQcow2,
		image.StageKernel, image.StageInitramfs, image.StageStore}

	for _, at := range []image.Stage{image.StageKernel, image.StageInitramfs} {
		t.Run(string(at), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stderr := &stageWatcher{stage: "image.box: " + string(at) + "…", cancel: cancel}
			var stdout bytes.Buffer
			code := Run([]string{"build", dir}, &Env{Stdout: &stdout, Stderr: stderr, Environ: f.environ, HTTPClient: f.client, Context: ctx})
			out := "--- stdout\n" + stdout.String() + "--- stderr before the interrupt\n" + stderr.before.String() + "--- after\n" + stderr.after.String()
			if !stderr.done {
				t.Fatalf("the build never reached %q:\n%s", at, out)
			}
			if code != ExitInterrupted {
				t.Errorf("exit %d, want %d:\n%s", code, ExitInterrupted, out)
			}
			if !strings.Contains(stderr.after.String(), "Interrupted") {
				t.Errorf("sbx does not say it was interrupted:\n%s", out)
			}
			for _, s := range stages {
				if strings.Contains(stderr.after.String(), "image.box: "+string(s)+"…") {
					t.Errorf("stage %q started after the interrupt:\n%s", s, out)
				}
			}
			if strings.Contains(stderr.after.String(), "Cannot build") {
				t.Errorf("the interrupt is reported as a failure:\n%s", out)
			}
			if !bytes.Equal(readFile(t, lockPath), locked) {
				t.Errorf("the interrupted build changed the lock file")
			}
			filepath.WalkDir(filepath.Join(cache, "outputs"), func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					t.Errorf("the interrupted build stored %s", p)
				}
				return nil
			})
		})
	}

	// Locking and planning interrupted before they begin say so too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	os.Remove(lockPath)
	for _, verb := range []string{"lock", "plan", "build"} {
		var stdout, stderr bytes.Buffer
		code := Run([]string{verb, dir}, &Env{Stdout: &stdout, Stderr: &stderr, Environ: f.environ, HTTPClient: f.client, Context: ctx})
		if code != ExitInterrupted || !strings.Contains(stderr.String(), "Interrupted") {
			t.Errorf("sbx %s interrupted: exit %d, want %d saying so:\n%s%s", verb, code, ExitInterrupted, &stdout, &stderr)
		}
	}
	if _, err := os.Stat(lockPath); err == nil {
		t.Errorf("an interrupted command wrote %s", lockPath)
	}
}
