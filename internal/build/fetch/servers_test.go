package fetch

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/cache"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func sri512(b []byte) string {
	s := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(s[:])
}

// counter counts the requests a server received, by path.
type counter struct {
	mu    sync.Mutex
	paths []string
	auth  []string
}

func (c *counter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.paths = append(c.paths, r.Method+" "+r.URL.EscapedPath())
		c.auth = append(c.auth, r.Header.Get("Authorization"))
		c.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (c *counter) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.paths)
}

func (c *counter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paths, c.auth = nil, nil
}

// tlsClient trusts the given test servers.
func tlsClient(srvs ...*httptest.Server) *http.Client {
	pool := x509.NewCertPool()
	for _, s := range srvs {
		pool.AddCert(s.Certificate())
	}
	tr := srvs[0].Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.RootCAs = pool
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// tgz makes an npm package tarball holding package/bin/tool.
func tgz(t *testing.T, body string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: "package/bin/tool", Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(body))
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// fakeNPM serves one package's document and tarballs over TLS under
// /npm/, requiring a bearer token when token is set.
type fakeNPM struct {
	name     string
	token    string
	versions map[string][]byte // version → tarball
	served   map[string][]byte // version → bytes actually sent, if different
	srv      *httptest.Server
	log      counter
}

func newFakeNPM(t *testing.T, name string) *fakeNPM {
	f := &fakeNPM{name: name, versions: map[string][]byte{}, served: map[string][]byte{}}
	f.srv = httptest.NewTLSServer(f.log.wrap(http.HandlerFunc(f.serve)))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeNPM) registry() string { return f.srv.URL + "/npm/" }

func (f *fakeNPM) serve(w http.ResponseWriter, r *http.Request) {
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	esc := strings.Replace(f.name, "/", "%2f", 1)
	p := r.URL.EscapedPath()
	if v, ok := strings.CutPrefix(p, "/npm/-/"+esc+"/"); ok {
		v = strings.TrimSuffix(v, ".tgz")
		body, ok := f.served[v]
		if !ok {
			body, ok = f.versions[v]
		}
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
		return
	}
	if p != "/npm/"+esc {
		http.NotFound(w, r)
		return
	}
	vs := map[string]any{}
	for v, b := range f.versions {
		vs[v] = map[string]any{"version": v, "dist": map[string]string{
			"tarball": f.registry() + "-/" + esc + "/" + v + ".tgz", "integrity": sri512(b),
		}}
	}
	json.NewEncoder(w).Encode(map[string]any{"name": f.name, "versions": vs})
}

// isolatedEnv has an empty home and no npm on PATH.
func isolatedEnv(t *testing.T, extra ...string) []string {
	return append([]string{"HOME=" + t.TempDir(), "PATH=" + t.TempDir()}, extra...)
}

// cacheFiles lists the blobs and outputs a cache holds and any temporary
// files left behind.
func cacheFiles(t *testing.T, c *cache.Cache) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(c.Root(), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(c.Root(), p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

func openCache(t *testing.T) *cache.Cache {
	t.Helper()
	c, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}
