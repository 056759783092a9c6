package debrepo

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/sbx-dev/sbx/internal/builders/cache"
	"github.com/ulikunitz/xz"
)

// fixturePkg is one package of a test repository.
type fixturePkg struct {
	name, version, arch string
	// fields are extra control fields (Depends, Provides, Conflicts…).
	fields map[string]string
	// files are the data tree: path (without leading /) to content. A
	// content starting with "->" makes a symbolic link; a path ending in
	// "/" a directory.
	files map[string]string
	// control are extra members of control.tar (md5sums, postinst…).
	control map[string]string
}

// fixtureRepo is a signed Debian repository served over TLS on
// loopback, built entirely by the test.
type fixtureRepo struct {
	srv  *httptest.Server
	key  *openpgp.Entity
	mu   sync.Mutex
	file map[string][]byte // URL path -> content
	hits map[string]int
}

const fixtureSuite = "stable"

func newFixtureRepo(t *testing.T, pkgs []fixturePkg) *fixtureRepo {
	t.Helper()
	key, err := openpgp.NewEntity("sbx test archive", "", "archive@test.invalid", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &fixtureRepo{key: key, file: map[string][]byte{}, hits: map[string]int{}}
	var index bytes.Buffer
	for _, p := range pkgs {
		deb := buildDeb(t, p)
		pool := fmt.Sprintf("pool/main/%s/%s_%s_%s.deb", p.name[:1], p.name, strings.ReplaceAll(p.version, ":", "%3a"), p.arch)
		r.file["/"+pool] = deb
		sum := sha256.Sum256(deb)
		fmt.Fprintf(&index, "Package: %s\nVersion: %s\nArchitecture: %s\n", p.name, p.version, p.arch)
		for _, k := range sortedMapKeys(p.fields) {
			fmt.Fprintf(&index, "%s: %s\n", k, p.fields[k])
		}
		fmt.Fprintf(&index, "Filename: %s\nSize: %d\nSHA256: %s\n\n", pool, len(deb), hex.EncodeToString(sum[:]))
	}
	var xzb bytes.Buffer
	xw, err := xz.NewWriter(&xzb)
	if err != nil {
		t.Fatal(err)
	}
	xw.Write(index.Bytes())
	xw.Close()
	r.file["/dists/stable/main/binary-amd64/Packages.xz"] = xzb.Bytes()
	r.file["/dists/stable/InRelease"] = r.sign(t, r.releaseText(map[string][]byte{"main/binary-amd64/Packages.xz": xzb.Bytes(), "main/binary-amd64/Packages": index.Bytes()}), key)
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		data, ok := r.file[req.URL.EscapedPath()]
		r.hits[req.URL.Path]++
		r.mu.Unlock()
		if !ok {
			http.NotFound(w, req)
			return
		}
		w.Write(data)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *fixtureRepo) releaseText(files map[string][]byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Origin: test\nSuite: %s\nCodename: %s\nArchitectures: amd64\nComponents: main\nSHA256:\n", fixtureSuite, fixtureSuite)
	for _, k := range sortedMapKeys(files) {
		sum := sha256.Sum256(files[k])
		fmt.Fprintf(&b, " %s %d %s\n", hex.EncodeToString(sum[:]), len(files[k]), k)
	}
	return b.Bytes()
}

func (r *fixtureRepo) sign(t *testing.T, text []byte, key *openpgp.Entity) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := clearsign.Encode(&out, key.PrivateKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(text)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func (r *fixtureRepo) set(path string, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.file[path] = data
}

func (r *fixtureRepo) get(path string) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.file[path]
}

func (r *fixtureRepo) source() Source {
	return Source{URI: r.srv.URL, Suite: fixtureSuite, Components: []string{"main"}}
}

// client returns a Client that trusts the repository's key and TLS
// certificate, with its own cache.
func (r *fixtureRepo) client(t *testing.T) *Client {
	t.Helper()
	c, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hc := r.srv.Client()
	hc.Timeout = 30 * time.Second
	return &Client{HTTP: hc, Cache: c, Keyring: openpgp.EntityList{r.key}, Arch: "amd64"}
}

func (r *fixtureRepo) index(t *testing.T) *Index {
	t.Helper()
	ix, err := r.client(t).Index(testCtx(t), []Source{r.source()})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// buildDeb writes a .deb the way dpkg-deb does: an ar archive of
// debian-binary, control.tar.gz and data.tar.xz.
func buildDeb(t *testing.T, p fixturePkg) []byte {
	t.Helper()
	ctl := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: test <t@test.invalid>\nDescription: test package %s\n", p.name, p.version, p.arch, p.name)
	for _, k := range sortedMapKeys(p.fields) {
		ctl += fmt.Sprintf("%s: %s\n", k, p.fields[k])
	}
	cfiles := map[string]string{"./control": ctl}
	for k, v := range p.control {
		cfiles["./"+k] = v
	}
	var cgz bytes.Buffer
	gw := gzip.NewWriter(&cgz)
	writeTar(t, gw, cfiles)
	gw.Close()
	dfiles := map[string]string{}
	for k, v := range p.files {
		dfiles["./"+k] = v
	}
	var dxz bytes.Buffer
	xw, err := xz.NewWriter(&dxz)
	if err != nil {
		t.Fatal(err)
	}
	writeTar(t, xw, dfiles)
	xw.Close()
	var ar bytes.Buffer
	ar.WriteString("!<arch>\n")
	for _, m := range []struct {
		name string
		data []byte
	}{{"debian-binary", []byte("2.0\n")}, {"control.tar.gz", cgz.Bytes()}, {"data.tar.xz", dxz.Bytes()}} {
		fmt.Fprintf(&ar, "%-16s%-12d%-6d%-6d%-8s%-10d`\n", m.name, 0, 0, 0, "100644", len(m.data))
		ar.Write(m.data)
		if len(m.data)%2 == 1 {
			ar.WriteByte('\n')
		}
	}
	return ar.Bytes()
}

func writeTar(t *testing.T, w interface{ Write([]byte) (int, error) }, files map[string]string) {
	t.Helper()
	tw := tar.NewWriter(w)
	// Parents first, as dpkg-deb writes them.
	dirs := map[string]bool{}
	for k := range files {
		for d := filepath.Dir(strings.TrimSuffix(k, "/")); d != "." && d != "/"; d = filepath.Dir(d) {
			dirs[d+"/"] = true
		}
	}
	all := map[string]string{}
	for d := range dirs {
		all[d] = ""
	}
	for k, v := range files {
		all[k] = v
	}
	for _, k := range sortedMapKeys(all) {
		v := all[k]
		h := &tar.Header{Name: k, Mode: 0o644, ModTime: time.Unix(1700000000, 0), Uname: "root", Gname: "root"}
		switch {
		case strings.HasSuffix(k, "/"):
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		case strings.HasPrefix(v, "->"):
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, strings.TrimPrefix(v, "->"), 0o777
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(v))
			if strings.Contains(k, "/bin/") {
				h.Mode = 0o755
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(v))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

func sortedMapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// writeFile is a helper for keyring files.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
