package command

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/lang"
)

// secretValue is the value of the test secret in the environment. No
// output or file may ever contain it.
const secretValue = "s3cr3t-value-that-must-never-show"

// fixture is a hermetic world for CLI tests: an in-process OCI registry, a
// fake npm registry over TLS, and an environment pointing npm at it.
type fixture struct {
	t       *testing.T
	reg     string // host:port of the OCI registry
	npm     *fakeNPM
	client  *http.Client
	environ []string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	regSrv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(regSrv.Close)
	npm := newFakeNPM(t)

	pool := x509.NewCertPool()
	pool.AddCert(npm.srv.Certificate())
	tr := npm.srv.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.RootCAs = pool
	home := t.TempDir()
	f := &fixture{
		t:      t,
		reg:    strings.TrimPrefix(regSrv.URL, "http://"),
		npm:    npm,
		client: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		environ: []string{
			"HOME=" + home,
			"PATH=" + os.Getenv("PATH"),
			"NPM_CONFIG_REGISTRY=" + npm.srv.URL + "/",
			"NPM_CONFIG_USERCONFIG=" + filepath.Join(home, "npmrc"),
			"API_TOKEN=" + secretValue,
			"GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=sbx test", "GIT_AUTHOR_EMAIL=test@example.com",
			"GIT_COMMITTER_NAME=sbx test", "GIT_COMMITTER_EMAIL=test@example.com",
		},
	}
	f.pushImage("v1")
	f.pushImage("v2")
	npm.publish("@acme/tool", "1.0.0")
	npm.publish("@acme/tool", "1.1.0")
	return f
}

// pushImage pushes a random image to base:tag and returns its digest.
func (f *fixture) pushImage(tag string) string {
	f.t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		f.t.Fatal(err)
	}
	ref, err := name.ParseReference(f.reg + "/test/base:" + tag)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		f.t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		f.t.Fatal(err)
	}
	return d.String()
}

// result is one CLI run.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// run runs sbx with args in the fixture's environment.
func (f *fixture) run(args ...string) result {
	f.t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(args, &Env{
		Stdout:     &stdout,
		Stderr:     &stderr,
		Environ:    f.environ,
		HTTPClient: f.client,
		Context:    context.Background(),
	})
	r := result{code: code, stdout: stdout.String(), stderr: stderr.String()}
	if strings.Contains(r.stdout+r.stderr, secretValue) {
		f.t.Errorf("sbx %s printed the secret value:\n%s", strings.Join(args, " "), r)
	}
	return r
}

// mustRun runs sbx and fails the test unless it exits with want.
func (f *fixture) mustRun(want int, args ...string) result {
	f.t.Helper()
	r := f.run(args...)
	if r.code != want {
		f.t.Fatalf("sbx %s: want exit %d, got:\n%s", strings.Join(args, " "), want, r)
	}
	return r
}

// specOptions vary the fixture spec.
type specOptions struct {
	baseTag     string   // default v1
	toolVersion string   // default 1.0.0
	allow       []string // default api.example.com
	cpus        int      // default 1
}

// spec returns the fixture configuration: an image from the in-process
// registry with an npm artifact and a local file, an egress block, a
// brokered secret and a sandbox.
func (f *fixture) spec(o specOptions) string {
	if o.baseTag == "" {
		o.baseTag = "v1"
	}
	if o.toolVersion == "" {
		o.toolVersion = "1.0.0"
	}
	if o.allow == nil {
		o.allow = []string{"api.example.com"}
	}
	if o.cpus == 0 {
		o.cpus = 1
	}
	allow, _ := json.Marshal(o.allow)
	return fmt.Sprintf(`variable "tool_version" {
  default = %q
}

image "box" {
  platform = "linux/amd64"
  base     = "%s/test/base:%s"

  artifact "tool" {
    source = "npm:@acme/tool@${var.tool_version}"
    file   = "package/bin/tool"
    dest   = "/usr/local/bin/tool"
    mode   = "0755"
  }

  artifact "data" {
    source = "file:./data.txt"
    dest   = "/etc/data.txt"
  }
}

egress "api" {
  allow = %s
}

secret "token" {
  env    = "API_TOKEN"
  hosts  = ["api.example.com"]
  source = "env:API_TOKEN"
}

sandbox "box" {
  image   = image.box
  egress  = [egress.api]
  secrets = [secret.token]
  cpus    = %d
  memory  = "512MiB"
}
`, o.toolVersion, f.reg, o.baseTag, allow, o.cpus)
}

// writeConfig writes the fixture spec and its local file into dir
// (created if needed) and returns dir.
func (f *fixture) writeConfig(dir string, o specOptions) string {
	f.t.Helper()
	writeFile(f.t, filepath.Join(dir, "main.hcl"), f.spec(o))
	writeFile(f.t, filepath.Join(dir, "data.txt"), "data\n")
	return dir
}

// applyState records dir's desired resources as applied, the way apply
// will: under the state lock.
func applyState(t *testing.T, dir string) {
	t.Helper()
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	lock, diags := lockfiles.Read(filepath.Join(dir, lockfiles.FileName))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	desired, diags := plan.Desired(cfg, lock)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	lease, err := state.Lock(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	st, err := lease.Load()
	if err != nil {
		t.Fatal(err)
	}
	st.Resources = desired
	if err := lease.Save(st); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gitRun runs git in dir with the fixture's environment.
func (f *fixture) gitRun(dir string, args ...string) {
	f.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = f.environ
	if out, err := cmd.CombinedOutput(); err != nil {
		f.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// fakeNPM is an npm registry serving packuments and tarballs over TLS.
type fakeNPM struct {
	t   *testing.T
	srv *httptest.Server
	mu  sync.Mutex
	// packages maps name → version → tarball.
	packages map[string]map[string][]byte
	// requests counts the requests served.
	requests int
}

func newFakeNPM(t *testing.T) *fakeNPM {
	f := &fakeNPM{t: t, packages: map[string]map[string][]byte{}}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// publish adds a package version whose tarball holds package/package.json
// and package/bin/tool.
func (f *fakeNPM) publish(pkg, version string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.packages[pkg] == nil {
		f.packages[pkg] = map[string][]byte{}
	}
	f.packages[pkg][version] = makeTgz(f.t, pkg, version)
}

// requestCount returns how many requests the registry has served.
func (f *fakeNPM) requestCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

func (f *fakeNPM) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	p, err := url.PathUnescape(strings.TrimPrefix(r.URL.EscapedPath(), "/"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	if rest, ok := strings.CutPrefix(p, "-/tarballs/"); ok {
		i := strings.LastIndex(rest, "/")
		if i < 0 {
			http.NotFound(w, r)
			return
		}
		tgz := f.packages[rest[:i]][strings.TrimSuffix(rest[i+1:], ".tgz")]
		if tgz == nil {
			http.NotFound(w, r)
			return
		}
		w.Write(tgz)
		return
	}
	versions := f.packages[p]
	if versions == nil {
		http.NotFound(w, r)
		return
	}
	vs := map[string]any{}
	latest := ""
	for v, tgz := range versions {
		sum1 := sha1.Sum(tgz)
		sum512 := sha512.Sum512(tgz)
		vs[v] = map[string]any{
			"name":    p,
			"version": v,
			"dist": map[string]string{
				"tarball":   f.srv.URL + "/-/tarballs/" + url.PathEscape(p) + "/" + v + ".tgz",
				"shasum":    hex.EncodeToString(sum1[:]),
				"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum512[:]),
			},
		}
		if v > latest {
			latest = v
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"name":      p,
		"dist-tags": map[string]string{"latest": latest},
		"versions":  vs,
	})
}

func makeTgz(t *testing.T, pkg, version string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	pj, _ := json.Marshal(map[string]string{"name": pkg, "version": version})
	files := []struct {
		name string
		mode int64
		body []byte
	}{
		{"package/package.json", 0o644, pj},
		{"package/bin/tool", 0o755, []byte("\x7fELF tool " + version + "\n")},
	}
	for _, file := range files {
		if err := tw.WriteHeader(&tar.Header{Name: file.name, Mode: file.mode, Size: int64(len(file.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(file.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
