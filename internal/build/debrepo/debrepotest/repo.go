package debrepotest

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
	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/debrepo"
	"github.com/ulikunitz/xz"
)

// Package is one package of a test repository.
type Package struct {
	Name, Version, Arch string
	// Fields are extra control fields (Depends, Provides, Conflicts…).
	Fields map[string]string
	// Files are the data tree: path (without leading /) to content. A
	// content starting with "->" makes a symbolic link; a path ending in
	// "/" a directory.
	Files map[string]string
	// Control are extra members of control.tar (md5sums, postinst…).
	Control map[string]string
}

// Repo is a signed Debian repository served over TLS on
// loopback, built entirely by the test.
type Repo struct {
	Srv  *httptest.Server
	Key  *openpgp.Entity
	mu   sync.Mutex
	file map[string][]byte // URL path -> content
	hits map[string]int
}

const Suite = "stable"

func NewRepo(t testing.TB, pkgs []Package) *Repo {
	t.Helper()
	key, err := openpgp.NewEntity("sbx test archive", "", "archive@test.invalid", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &Repo{Key: key, file: map[string][]byte{}, hits: map[string]int{}}
	var index bytes.Buffer
	for _, p := range pkgs {
		deb := BuildDeb(t, p)
		pool := fmt.Sprintf("pool/main/%s/%s_%s_%s.deb", p.Name[:1], p.Name, strings.ReplaceAll(p.Version, ":", "%3a"), p.Arch)
		r.file["/"+pool] = deb
		sum := sha256.Sum256(deb)
		fmt.Fprintf(&index, "Package: %s\nVersion: %s\nArchitecture: %s\n", p.Name, p.Version, p.Arch)
		for _, k := range sortedMapKeys(p.Fields) {
			fmt.Fprintf(&index, "%s: %s\n", k, p.Fields[k])
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
	r.file["/dists/stable/InRelease"] = r.Sign(t, r.releaseText(map[string][]byte{"main/binary-amd64/Packages.xz": xzb.Bytes(), "main/binary-amd64/Packages": index.Bytes()}), key)
	r.Srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
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
	t.Cleanup(r.Srv.Close)
	return r
}

func (r *Repo) releaseText(files map[string][]byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Origin: test\nSuite: %s\nCodename: %s\nArchitectures: amd64\nComponents: main\nSHA256:\n", Suite, Suite)
	for _, k := range sortedMapKeys(files) {
		sum := sha256.Sum256(files[k])
		fmt.Fprintf(&b, " %s %d %s\n", hex.EncodeToString(sum[:]), len(files[k]), k)
	}
	return b.Bytes()
}

func (r *Repo) Sign(t testing.TB, text []byte, key *openpgp.Entity) []byte {
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

func (r *Repo) Set(path string, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.file[path] = data
}

func (r *Repo) Get(path string) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.file[path]
}

func (r *Repo) Source() debrepo.Source {
	return debrepo.Source{URI: r.Srv.URL, Suite: Suite, Components: []string{"main"}}
}

// client returns a Client that trusts the repository's key and TLS
// certificate, with its own cache.
func (r *Repo) Client(t testing.TB) *debrepo.Client {
	t.Helper()
	c, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hc := r.Srv.Client()
	hc.Timeout = 30 * time.Second
	return &debrepo.Client{HTTP: hc, Cache: c, Keyring: openpgp.EntityList{r.Key}, Arch: "amd64"}
}

func (r *Repo) Index(t testing.TB) *debrepo.Index {
	t.Helper()
	ix, err := r.Client(t).Index(Ctx(t), []debrepo.Source{r.Source()})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// buildDeb writes a .deb the way dpkg-deb does: an ar archive of
// debian-binary, control.tar.gz and data.tar.xz.
func BuildDeb(t testing.TB, p Package) []byte {
	t.Helper()
	ctl := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: test <t@test.invalid>\nDescription: test package %s\n", p.Name, p.Version, p.Arch, p.Name)
	for _, k := range sortedMapKeys(p.Fields) {
		ctl += fmt.Sprintf("%s: %s\n", k, p.Fields[k])
	}
	cfiles := map[string]string{"./control": ctl}
	for k, v := range p.Control {
		cfiles["./"+k] = v
	}
	var cgz bytes.Buffer
	gw := gzip.NewWriter(&cgz)
	writeTar(t, gw, cfiles)
	gw.Close()
	dfiles := map[string]string{}
	for k, v := range p.Files {
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

func writeTar(t testing.TB, w interface{ Write([]byte) (int, error) }, files map[string]string) {
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
func WriteFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
