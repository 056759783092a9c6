package image_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha256"
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
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sbx-dev/sbx/internal/build/agentbin"
	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/archive/archivetest"
	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/fetch"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/build/kernel"
	"github.com/sbx-dev/sbx/internal/build/kernel/kerneltest"
	"github.com/sbx-dev/sbx/internal/build/resolve"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// testEpoch is SOURCE_DATE_EPOCH for every test build.
const testEpoch = 1700000000

var amd64 = lang.Platform{OS: "linux", Architecture: "amd64"}

// shared holds what every test of this binary reuses: the guest agent,
// built once, and the real Debian kernel, loaded once (about 20 s).
var shared struct {
	agentOnce sync.Once
	agentDir  string
	agent     string
	agentErr  error

	debOnce sync.Once
	deb     string
	debSum  string
	debPkg  string
	debVer  string

	kernelMu sync.Mutex
	kernels  map[string]*kernel.Kernel
	loads    atomic.Int64
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.agentDir != "" {
		os.RemoveAll(shared.agentDir)
	}
	os.Exit(code)
}

// testAgent returns the guest agent, built from this source tree.
func testAgent(t testing.TB) string {
	t.Helper()
	shared.agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sbx-image-test-agent-*")
		if err != nil {
			shared.agentErr = err
			return
		}
		shared.agentDir = dir
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		shared.agent, shared.agentErr = agentbin.Build(ctx, amd64, dir)
	})
	if shared.agentErr != nil {
		t.Fatalf("building the guest agent: %v", shared.agentErr)
	}
	return shared.agent
}

// kernelDeb returns the real Debian kernel package, its sha256, package
// name and version.
func kernelDeb(t testing.TB) (path, sum, pkg, version string) {
	t.Helper()
	shared.debOnce.Do(func() {
		p := kerneltest.DebianKernelDeb(t)
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fields, err := archive.Control(f)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(data)
		shared.deb, shared.debSum = p, "sha256:"+hex.EncodeToString(s[:])
		shared.debPkg, shared.debVer = fields.Get("Package"), fields.Get("Version")
	})
	if shared.deb == "" {
		t.Fatal("the Debian kernel package could not be read")
	}
	return shared.deb, shared.debSum, shared.debPkg, shared.debVer
}

// loadKernel is image.Options.LoadKernel for tests: the real kernel is
// read once per test binary; any other kernel package as Build would.
func loadKernel(ctx context.Context, blob fetch.Blob, opts kernel.Options) (*kernel.Kernel, error) {
	if blob.Digest != shared.debSum {
		return kernel.Load(ctx, blob.Path, opts)
	}
	shared.kernelMu.Lock()
	defer shared.kernelMu.Unlock()
	key := opts.Image
	if k := shared.kernels[key]; k != nil {
		return k, nil
	}
	// Load keeps the bytes of the modules it is told about; name the
	// whole closure so that no build has to read the archive again.
	shared.loads.Add(1)
	k, err := kernel.Load(ctx, shared.deb, opts)
	if err != nil {
		return nil, err
	}
	mods, err := k.Closure(append(slices.Clone(kernel.DefaultModules), opts.Modules...))
	if err != nil {
		return nil, err
	}
	names := slices.Clone(opts.Modules)
	for _, m := range mods {
		names = append(names, m.Name)
	}
	if k, err = kernel.Load(ctx, shared.deb, kernel.Options{Image: opts.Image, Modules: names}); err != nil {
		return nil, err
	}
	if shared.kernels == nil {
		shared.kernels = map[string]*kernel.Kernel{}
	}
	shared.kernels[key] = k
	return k, nil
}

// counter counts requests to a test server.
type counter struct{ n atomic.Int64 }

// world is a hermetic set of sources: an in-process OCI registry with a
// base image, a fake npm registry over TLS, an apt that serves the real
// kernel package, and a configuration directory.
type world struct {
	t       *testing.T
	reg     string // host:port
	regHits counter
	// tamperBlobs makes the registry flip a byte of every blob it serves.
	tamperBlobs atomic.Bool
	npm         *fakeNPM
	apt         *fakeApt
	client      *http.Client
	environ     []string
	dir         string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, dir: t.TempDir()}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	regSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.regHits.n.Add(1)
		if w.tamperBlobs.Load() && r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/sha256:") {
			rec := httptest.NewRecorder()
			reg.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			if len(body) > 0 {
				body[len(body)/2] ^= 0xff
			}
			for k, v := range rec.Header() {
				rw.Header()[k] = v
			}
			rw.WriteHeader(rec.Code)
			rw.Write(body)
			return
		}
		reg.ServeHTTP(rw, r)
	}))
	t.Cleanup(regSrv.Close)
	w.reg = strings.TrimPrefix(regSrv.URL, "http://")
	w.npm = newFakeNPM(t)
	_, _, pkg, version := kernelDeb(t)
	w.apt = &fakeApt{pkg: pkg, version: version}

	pool := x509.NewCertPool()
	pool.AddCert(w.npm.srv.Certificate())
	tr := w.npm.srv.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.RootCAs = pool
	w.client = &http.Client{Transport: tr, Timeout: time.Minute}
	home := t.TempDir()
	w.environ = []string{
		"HOME=" + home,
		"PATH=" + os.Getenv("PATH"),
		"NPM_CONFIG_REGISTRY=" + w.npm.srv.URL + "/",
		"NPM_CONFIG_USERCONFIG=" + filepath.Join(home, "npmrc"),
	}
	w.pushBase("v1")
	w.npm.publish("@acme/tool", "1.0.0", "#!/bin/sh\necho tool 1.0.0\n")
	return w
}

// pushBase pushes the base image: two layers, the lower with account
// files, a program, a symbolic link, a hard link and a file the upper
// layer deletes.
func (w *world) pushBase(tag string) {
	t := w.t
	t.Helper()
	lower := archivetest.Tar(t,
		archivetest.Entry{Name: "etc/"},
		archivetest.Entry{Name: "etc/passwd", Body: "root:x:0:0:root:/root:/bin/sh\n"},
		archivetest.Entry{Name: "etc/group", Body: "root:x:0:\n"},
		archivetest.Entry{Name: "etc/shadow", Body: "root:*:19000:0:99999:7:::\n", Mode: 0o600},
		archivetest.Entry{Name: "usr/"},
		archivetest.Entry{Name: "usr/bin/"},
		archivetest.Entry{Name: "usr/bin/hello", Body: "hello from the base\n", Mode: 0o755},
		archivetest.Entry{Name: "usr/bin/hi", Type: tar.TypeSymlink, Linkname: "hello"},
		archivetest.Entry{Name: "usr/bin/hello-again", Type: tar.TypeLink, Linkname: "usr/bin/hello"},
		archivetest.Entry{Name: "var/"},
		archivetest.Entry{Name: "var/lib/"},
		archivetest.Entry{Name: "var/lib/old", Body: "deleted above\n"},
		archivetest.Entry{Name: "usr/share/"},
		archivetest.Entry{Name: "usr/share/big", Body: bigFile()},
	)
	upper := archivetest.Tar(t,
		archivetest.Entry{Name: "var/lib/.wh.old"},
		archivetest.Entry{Name: "etc/os-release", Body: "ID=sbxtest\n"},
	)
	img := empty.Image
	for _, layer := range [][]byte{lower, upper} {
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(layer)), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			t.Fatal(err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(w.reg + "/test/base:" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
}

// bigFile is 2 MiB of incompressible bytes, so that the root filesystem
// does not fit in lang's smallest size, 1 MiB.
func bigFile() string {
	var b strings.Builder
	h := sha256.Sum256([]byte("big"))
	for b.Len() < 2<<20 {
		h = sha256.Sum256(h[:])
		b.Write(h[:])
	}
	return b.String()
}

// specOptions vary the test spec.
type specOptions struct {
	toolMode string // default 0755
	toolFile string // default package/bin/tool
	size     string // default 64MiB; "none" leaves size out
	noKernel bool
}

// spec is the test image: a base from the registry, the real kernel, an
// npm artifact, a local file, a user and a file block.
func (w *world) spec(o specOptions) string {
	if o.toolMode == "" {
		o.toolMode = "0755"
	}
	if o.toolFile == "" {
		o.toolFile = "package/bin/tool"
	}
	size := `  size     = "64MiB"` + "\n"
	switch o.size {
	case "":
	case "none":
		size = ""
	default:
		size = fmt.Sprintf("  size     = %q\n", o.size)
	}
	kern := fmt.Sprintf(`
  kernel {
    source  = "deb:%s=%s"
    file    = "boot/vmlinuz-*"
    cmdline = "quiet"
  }
`, w.apt.pkg, w.apt.version)
	if o.noKernel {
		kern = ""
	}
	return fmt.Sprintf(`image "box" {
  platform = "linux/amd64"
  base     = "%s/test/base:v1"
%s%s
  artifact "tool" {
    source = "npm:@acme/tool@1.0.0"
    file   = %q
    dest   = "/usr/local/bin/tool"
    mode   = %q
    uid    = 1000
    gid    = 1000
  }

  artifact "data" {
    source = "file:./data.txt"
    dest   = "/etc/data.txt"
    mode   = "0640"
  }

  user "agent" {
    uid = 1000
  }

  file "/etc/motd" {
    content = "sandbox\n"
    mode    = "0600"
  }
}
`, w.reg, size, kern, o.toolFile, o.toolMode)
}

// configure writes the spec and its local file into a new directory,
// loads it and locks it.
func (w *world) configure(t *testing.T, o specOptions) (*lang.Config, *lockfiles.Lock) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.hcl"), w.spec(o))
	writeFile(t, filepath.Join(dir, "data.txt"), "local data\n")
	w.dir = dir
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	set := resolve.New(resolve.Options{
		Dir: dir, Environ: w.environ, HTTPClient: w.client,
		Keychain: authn.NewMultiKeychain(), Apt: w.apt,
	})
	lock, _, diags := set.Lock(context.Background(), cfg, nil, false)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return cfg, lock
}

// options are build options using c (a new cache when nil).
func (w *world) options(t *testing.T, c *cache.Cache) image.Options {
	t.Helper()
	if c == nil {
		c = newCache(t)
	}
	agent := testAgent(t)
	kernelDeb(t)
	return image.Options{
		Cache: c,
		Fetch: fetch.Options{
			Dir: w.dir, Environ: w.environ, HTTPClient: w.client,
			Keychain: authn.NewMultiKeychain(), Apt: w.apt,
		},
		Agent:      func(lang.Platform) (string, error) { return agent, nil },
		LoadKernel: loadKernel,
		Epoch:      testEpoch,
		TempDir:    t.TempDir(),
	}
}

// hits is the number of requests every source has served.
func (w *world) hits() int64 {
	return w.regHits.n.Load() + w.npm.hits.n.Load() + w.apt.calls.Load()
}

func newCache(t testing.TB) *cache.Cache {
	t.Helper()
	c, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fakeApt serves the real kernel package as apt-get download would.
type fakeApt struct {
	pkg, version string
	calls        atomic.Int64
}

func (a *fakeApt) Download(_ context.Context, pkg, version, dir string) (string, error) {
	a.calls.Add(1)
	pkg = strings.TrimSuffix(pkg, ":amd64")
	if pkg != a.pkg || version != a.version {
		return "", fmt.Errorf("E: Unable to locate package %s=%s", pkg, version)
	}
	data, err := os.ReadFile(shared.deb)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, filepath.Base(shared.deb))
	return p, os.WriteFile(p, data, 0o644)
}

// fakeNPM is an npm registry serving package documents and tarballs.
type fakeNPM struct {
	t    *testing.T
	srv  *httptest.Server
	hits counter
	mu   sync.Mutex
	// packages maps name → version → tarball.
	packages map[string]map[string][]byte
	// tampered, when set, is served instead of every tarball.
	tampered []byte
}

func newFakeNPM(t *testing.T) *fakeNPM {
	f := &fakeNPM{t: t, packages: map[string]map[string][]byte{}}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// publish adds a package version whose tarball holds package/package.json
// and package/bin/tool with the given content.
func (f *fakeNPM) publish(pkg, version, tool string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.packages[pkg] == nil {
		f.packages[pkg] = map[string][]byte{}
	}
	f.packages[pkg][version] = makeTgz(f.t, pkg, version, tool)
}

// tamper makes the registry serve other bytes for every tarball.
func (f *fakeNPM) tamper(tool string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tampered = makeTgz(f.t, "@acme/tool", "1.0.0", tool)
	return f.tampered
}

func (f *fakeNPM) serve(w http.ResponseWriter, r *http.Request) {
	f.hits.n.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
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
		if f.tampered != nil {
			tgz = f.tampered
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
	json.NewEncoder(w).Encode(map[string]any{"name": p, "dist-tags": map[string]string{"latest": latest}, "versions": vs})
}

func makeTgz(t *testing.T, pkg, version, tool string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	pj, _ := json.Marshal(map[string]string{"name": pkg, "version": version})
	for _, file := range []struct {
		name string
		mode int64
		body []byte
	}{
		{"package/package.json", 0o644, pj},
		{"package/bin/tool", 0o755, []byte(tool)},
	} {
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

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sha256File returns "sha256:<hex>" of a file.
func sha256File(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(s[:])
}
