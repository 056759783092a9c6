package resolve

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sbx-dev/sbx/lang"
)

// platformImage is a random image whose config names p.
func platformImage(t *testing.T, p v1.Platform) v1.Image {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// ociFixture is an in-process registry holding a two-platform index
// (test/multi:latest) and a linux/amd64 image (test/single:1).
type ociFixture struct {
	host   string
	log    *requestLog
	index  v1.ImageIndex
	amd64  v1.Image
	arm64  v1.Image
	single v1.Image
}

func digestOf(t *testing.T, x interface{ Digest() (v1.Hash, error) }) string {
	t.Helper()
	h, err := x.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

func newOCIFixture(t *testing.T) *ociFixture {
	t.Helper()
	f := &ociFixture{log: &requestLog{}}
	srv := httptest.NewServer(f.log.wrap(registry.New(registry.Logger(log.New(io.Discard, "", 0)))))
	t.Cleanup(srv.Close)
	f.host = strings.TrimPrefix(srv.URL, "http://")

	f.amd64 = platformImage(t, v1.Platform{OS: "linux", Architecture: "amd64"})
	f.arm64 = platformImage(t, v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"})
	attestation, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	f.index = mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: f.amd64, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: f.arm64, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}}},
		mutate.IndexAddendum{Add: attestation, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "unknown", Architecture: "unknown"}}},
	)
	f.single = platformImage(t, v1.Platform{OS: "linux", Architecture: "amd64"})

	if err := remote.WriteIndex(f.ref(t, "test/multi:latest"), f.index); err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(f.ref(t, "test/single:1"), f.single); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *ociFixture) ref(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(f.host + "/" + s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *ociFixture) source(ref string) *lang.Source {
	r := f.host + "/" + ref
	return &lang.Source{Kind: lang.SourceOCI, Raw: r, Ref: r}
}

// anonymous is a keychain that never finds credentials, so the machine's
// docker configuration plays no part in tests.
type anonymous struct{}

func (anonymous) Resolve(authn.Resource) (authn.Authenticator, error) { return authn.Anonymous, nil }

func TestOCIIndex(t *testing.T) {
	f := newOCIFixture(t)
	s := New(Options{Keychain: anonymous{}})
	ctx := context.Background()
	idx := digestOf(t, f.index)

	for _, c := range []struct {
		platform lang.Platform
		want     string
	}{
		{linuxAMD64, digestOf(t, f.amd64)},
		{lang.Platform{OS: "linux", Architecture: "arm64"}, digestOf(t, f.arm64)},
		{lang.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}, digestOf(t, f.arm64)},
	} {
		pin, err := s.Resolve(ctx, f.source("test/multi:latest"), c.platform)
		if err != nil {
			t.Fatalf("%s: %v", c.platform, err)
		}
		if pin.Digest != idx || pin.Manifest != c.want || pin.Kind != "oci" {
			t.Errorf("%s: pin = %+v, want index %s manifest %s", c.platform, pin, idx, c.want)
		}
	}

	_, err := s.Resolve(ctx, f.source("test/multi:latest"), lang.Platform{OS: "linux", Architecture: "riscv64"})
	if err == nil || !strings.Contains(err.Error(), "available: linux/amd64, linux/arm64/v8)") || !strings.Contains(err.Error(), "linux/riscv64") {
		t.Errorf("err = %v, want the available platforms", err)
	}

	// Pinned by digest: the registry must serve exactly that.
	pin, err := s.Resolve(ctx, f.source("test/multi@"+idx), linuxAMD64)
	if err != nil || pin.Digest != idx || pin.Manifest != digestOf(t, f.amd64) {
		t.Errorf("by digest: pin = %+v, err = %v", pin, err)
	}
	absent := "sha256:" + strings.Repeat("ab", 32)
	if _, err := s.Resolve(ctx, f.source("test/multi@"+absent), linuxAMD64); err == nil {
		t.Errorf("an absent digest resolved")
	}
}

func TestOCISingleManifest(t *testing.T) {
	f := newOCIFixture(t)
	s := New(Options{Keychain: anonymous{}})
	ctx := context.Background()
	d := digestOf(t, f.single)

	pin, err := s.Resolve(ctx, f.source("test/single:1"), linuxAMD64)
	if err != nil {
		t.Fatal(err)
	}
	if pin.Digest != d || pin.Manifest != d {
		t.Errorf("pin = %+v, want %s twice", pin, d)
	}
	_, err = s.Resolve(ctx, f.source("test/single:1"), lang.Platform{OS: "linux", Architecture: "arm64"})
	if err == nil || !strings.Contains(err.Error(), "single-platform image for linux/amd64, not linux/arm64") {
		t.Errorf("err = %v", err)
	}
	if _, err := s.Resolve(ctx, f.source("test/nothing:1"), linuxAMD64); err == nil || !strings.Contains(err.Error(), "test/nothing:1") {
		t.Errorf("missing repository: err = %v", err)
	}
}

type refusingTransport struct{}

func (refusingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("refused by the test transport")
}

// TestOCIOptionsReachRegistry checks OCIOptions are used: a transport
// that refuses everything makes resolution fail.
func TestOCIOptionsReachRegistry(t *testing.T) {
	f := newOCIFixture(t)
	s := New(Options{Keychain: anonymous{}, OCIOptions: []remote.Option{remote.WithTransport(refusingTransport{})}})
	before := f.log.count()
	_, err := s.Resolve(context.Background(), f.source("test/single:1"), linuxAMD64)
	if err == nil || !strings.Contains(err.Error(), "refused by the test transport") {
		t.Fatalf("err = %v, want the transport's refusal", err)
	}
	if f.log.count() != before {
		t.Fatal("a request bypassed the transport")
	}
}

func writeLayout(t *testing.T, f *ociFixture) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cfg")
	p, err := layout.Write(filepath.Join(dir, "images"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(f.index, layout.WithAnnotations(map[string]string{refNameAnnotation: "v1"})); err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(f.single, layout.WithAnnotations(map[string]string{refNameAnnotation: "example.com/single:2"})); err != nil {
		t.Fatal(err)
	}
	return dir
}

func layoutSource(version string) *lang.Source {
	raw := "oci-layout:images"
	switch {
	case strings.HasPrefix(version, "sha256:"):
		raw += "@" + version
	case version != "":
		raw += ":" + version
	}
	return &lang.Source{Kind: lang.SourceOCILayout, Raw: raw, Ref: "images", Version: version}
}

func TestOCILayout(t *testing.T) {
	f := newOCIFixture(t)
	dir := writeLayout(t, f)
	s := New(Options{Dir: dir})
	ctx := context.Background()
	arm := lang.Platform{OS: "linux", Architecture: "arm64"}

	pin, err := s.Resolve(ctx, layoutSource("v1"), arm)
	if err != nil {
		t.Fatal(err)
	}
	if pin.Digest != digestOf(t, f.index) || pin.Manifest != digestOf(t, f.arm64) || pin.Kind != "oci-layout" {
		t.Errorf("by tag: pin = %+v", pin)
	}
	pin, err = s.Resolve(ctx, layoutSource("2"), linuxAMD64)
	if err != nil || pin.Manifest != digestOf(t, f.single) || pin.Digest != pin.Manifest {
		t.Errorf("by tag of a full reference: pin = %+v, err = %v", pin, err)
	}
	pin, err = s.Resolve(ctx, layoutSource(digestOf(t, f.index)), linuxAMD64)
	if err != nil || pin.Manifest != digestOf(t, f.amd64) {
		t.Errorf("by digest: pin = %+v, err = %v", pin, err)
	}

	for _, c := range []struct {
		src      *lang.Source
		platform lang.Platform
		msg      string
	}{
		{layoutSource(""), linuxAMD64, "has 2 entries; name one with :TAG or @sha256:… (tags: v1, example.com/single:2)"},
		{layoutSource("v9"), linuxAMD64, `no entry tagged "v9"`},
		{layoutSource("2"), arm, "single-platform image for linux/amd64, not linux/arm64"},
		{layoutSource("v1"), lang.Platform{OS: "linux", Architecture: "s390x"}, "available: linux/amd64, linux/arm64/v8"},
		{&lang.Source{Kind: lang.SourceOCILayout, Raw: "oci-layout:elsewhere", Ref: "elsewhere"}, linuxAMD64, "is not an OCI image layout"},
	} {
		_, err := s.Resolve(ctx, c.src, c.platform)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err = %v, want %q", c.src.Raw, err, c.msg)
		}
	}
}

func TestOCILayoutCorruptBlob(t *testing.T) {
	f := newOCIFixture(t)
	dir := writeLayout(t, f)
	h, err := f.index.Digest()
	if err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(dir, "images", "blobs", "sha256", h.Hex)
	if err := os.WriteFile(blob, []byte(`{"schemaVersion":2,"manifests":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := New(Options{Dir: dir})
	_, err = s.Resolve(context.Background(), layoutSource("v1"), linuxAMD64)
	if err == nil || !strings.Contains(err.Error(), "sha256 mismatch") || !strings.Contains(err.Error(), h.Hex) {
		t.Errorf("err = %v, want a mismatch naming %s", err, h.Hex)
	}
}
