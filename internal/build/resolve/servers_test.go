package resolve

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// tlsClient trusts every given test server.
func tlsClient(t *testing.T, srvs ...*httptest.Server) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	for _, s := range srvs {
		pool.AddCert(s.Certificate())
	}
	tr := srvs[0].Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.RootCAs = pool
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// requestLog counts the requests a test server received.
type requestLog struct {
	mu    sync.Mutex
	paths []string
	auth  []string
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.paths = append(l.paths, r.Method+" "+r.URL.EscapedPath())
		l.auth = append(l.auth, r.Header.Get("Authorization"))
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (l *requestLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.paths)
}

func (l *requestLog) snapshot() (paths, auth []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.paths...), append([]string(nil), l.auth...)
}

// makeTgz builds an npm package tarball: package/package.json and a
// binary file package/bin/tool.
func makeTgz(t *testing.T, name, version string, binary []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	pj, _ := json.Marshal(map[string]string{"name": name, "version": version})
	for _, f := range []struct {
		name string
		mode int64
		body []byte
	}{
		{"package/package.json", 0o644, pj},
		{"package/bin/tool", 0o755, binary},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.body); err != nil {
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

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func sri512(b []byte) string {
	s := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(s[:])
}

func sha1Hex(b []byte) string {
	s := sha1.Sum(b)
	return hex.EncodeToString(s[:])
}

// npmVersion is one published version in a fake registry.
type npmVersion struct {
	tgz []byte
	// served replaces the tarball bytes sent (tampering); nil sends tgz.
	served []byte
	// noIntegrity publishes only the sha1 shasum, as old packages do.
	noIntegrity bool
}

// fakeNPM is an npm registry serving packuments and tarballs under
// prefix (e.g. "/npm/"), optionally requiring a bearer token.
type fakeNPM struct {
	t        *testing.T
	prefix   string
	token    string
	packages map[string]map[string]*npmVersion // name → version → files
	tags     map[string]map[string]string      // name → dist-tags
	srv      *httptest.Server
	log      requestLog
}

func newFakeNPM(t *testing.T, prefix string) *fakeNPM {
	f := &fakeNPM{t: t, prefix: prefix, packages: map[string]map[string]*npmVersion{}, tags: map[string]map[string]string{}}
	f.srv = httptest.NewTLSServer(f.log.wrap(http.HandlerFunc(f.serve)))
	t.Cleanup(f.srv.Close)
	return f
}

// registry is the registry URL to configure.
func (f *fakeNPM) registry() string { return f.srv.URL + f.prefix }

// host is the host:port of the registry, as .npmrc auth keys name it.
func (f *fakeNPM) host() string { return strings.TrimPrefix(f.srv.URL, "https://") }

func (f *fakeNPM) publish(name, version string, v *npmVersion) {
	if f.packages[name] == nil {
		f.packages[name] = map[string]*npmVersion{}
		f.tags[name] = map[string]string{}
	}
	if v.tgz == nil {
		v.tgz = makeTgz(f.t, name, version, []byte("\x7fELF binary of "+name+"@"+version+"\x00\x01\x02"))
	}
	f.packages[name][version] = v
	f.tags[name]["latest"] = version
}

func (f *fakeNPM) serve(w http.ResponseWriter, r *http.Request) {
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	p := r.URL.EscapedPath()
	if !strings.HasPrefix(p, f.prefix) {
		http.NotFound(w, r)
		return
	}
	p = strings.TrimPrefix(p, f.prefix)
	if rest, ok := strings.CutPrefix(p, "-/tarballs/"); ok {
		name, version, _ := strings.Cut(rest, "/")
		name = strings.ReplaceAll(name, "%2f", "/")
		v := f.packages[name][strings.TrimSuffix(version, ".tgz")]
		if v == nil {
			http.NotFound(w, r)
			return
		}
		body := v.tgz
		if v.served != nil {
			body = v.served
		}
		w.Write(body)
		return
	}
	// npm asks for a scoped package as @scope%2fname.
	name := strings.Replace(p, "%2f", "/", 1)
	name = strings.Replace(name, "%2F", "/", 1)
	if strings.Contains(p, "/") {
		http.NotFound(w, r)
		return
	}
	versions := f.packages[name]
	if versions == nil {
		http.NotFound(w, r)
		return
	}
	doc := map[string]any{"name": name, "dist-tags": f.tags[name]}
	vs := map[string]any{}
	for ver, v := range versions {
		dist := map[string]string{
			"tarball": f.registry() + "-/tarballs/" + strings.Replace(name, "/", "%2f", 1) + "/" + ver + ".tgz",
			"shasum":  sha1Hex(v.tgz),
		}
		if !v.noIntegrity {
			dist["integrity"] = sri512(v.tgz)
		}
		vs[ver] = map[string]any{"name": name, "version": ver, "dist": dist}
	}
	doc["versions"] = vs
	w.Header().Set("Content-Type", "application/vnd.npm.install-v1+json")
	json.NewEncoder(w).Encode(doc)
}
