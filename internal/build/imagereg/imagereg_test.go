package imagereg

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/image"
)

// fileNames are a build's output files, as image.json names them.
var fileNames = map[string]string{
	image.OutputKernel: "vmlinuz", image.OutputInitramfs: "initramfs.cpio",
	image.OutputDisk: "disk.qcow2", image.OutputAgent: "sbx-guest",
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// build stores a build in a cache the way Build leaves one (through
// Import, from bytes in memory) and returns it.
func build(t *testing.T, c *cache.Cache, seed string) *image.Result {
	t.Helper()
	files := map[string][]byte{}
	m := image.Manifest{
		Version: image.ManifestVersion, Image: "agent", Platform: "linux/amd64",
		InputHash: sum([]byte("input " + seed)), BuildKey: sum([]byte("key " + seed)),
		FormatVersion: image.FormatVersion, Outputs: map[string]image.ManifestOutput{},
	}
	for _, out := range image.OutputOrder() {
		b := bytes.Repeat([]byte(out+" of "+seed+"\n"), 1000)
		files[out] = b
		m.Outputs[out] = image.ManifestOutput{File: fileNames[out], Digest: sum(b), Size: int64(len(b))}
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	r, err := image.Import(context.Background(), c, data, func(_ context.Context, out string, w io.Writer) error {
		_, err := w.Write(files[out])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func want(r *image.Result) Want {
	return Want{Image: r.Image, InputHash: r.InputHash, Outputs: r.Digests()}
}

func openCache(t *testing.T) *cache.Cache {
	t.Helper()
	c, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serve runs go-containerregistry's registry on loopback; tamper, when
// set, may change each response body of a blob.
func serve(t *testing.T, tamper *atomic.Bool) string {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tamper != nil && tamper.Load() && r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			rec := httptest.NewRecorder()
			reg.ServeHTTP(rec, r)
			b := rec.Body.Bytes()
			if len(b) > 0 {
				b[len(b)/2] ^= 0xff
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(b)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// A pushed build pulled into another cache is the same bytes under the
// same build key, where the next build finds it; the digest Push
// returns pulls it too.
func TestPushPull(t *testing.T) {
	ctx := context.Background()
	host := serve(t, nil)
	src := openCache(t)
	r := build(t, src, "a")
	d, err := Push(ctx, r, host+"/team/agent", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d.String(), host+"/team/agent@sha256:") {
		t.Errorf("pushed as %s", d)
	}
	for _, ref := range []string{d.String(), host + "/team/agent:sbx-" + strings.TrimPrefix(r.BuildKey, "sha256:")[:12]} {
		dst := openCache(t)
		got, err := Pull(ctx, ref, dst, want(r), Options{})
		if err != nil {
			t.Fatalf("pull %s: %v", ref, err)
		}
		if got.BuildKey != r.BuildKey || got.InputHash != r.InputHash {
			t.Errorf("pulled %s/%s, pushed %s/%s", got.BuildKey, got.InputHash, r.BuildKey, r.InputHash)
		}
		for _, out := range image.OutputOrder() {
			a, _ := os.ReadFile(r.Outputs[out].Path)
			b, err := os.ReadFile(got.Outputs[out].Path)
			if err != nil || !bytes.Equal(a, b) {
				t.Errorf("output %s: pulled %d bytes (%v), pushed %d", out, len(b), err, len(a))
			}
			if p, ok, _ := dst.OutputPath(r.BuildKey, fileNames[out]); !ok || p != got.Outputs[out].Path {
				t.Errorf("output %s is not in the cache under the build key: %s", out, p)
			}
		}
		if _, ok, _ := dst.OutputPath(r.BuildKey, image.ManifestFile); !ok {
			t.Error("no image.json under the build key")
		}
	}
}

// An artifact that is not the build the lock records is refused with
// nothing stored: another build, another input hash, a lock with no
// output hashes; so is a registry whose blobs do not match their digests.
func TestPullRefused(t *testing.T) {
	ctx := context.Background()
	var tamper atomic.Bool
	host := serve(t, &tamper)
	src := openCache(t)
	a, b := build(t, src, "a"), build(t, src, "b")
	if _, err := Push(ctx, a, host+"/team/agent:a", Options{}); err != nil {
		t.Fatal(err)
	}
	other := want(b)
	otherInput := want(a)
	otherInput.InputHash = b.InputHash
	otherDisk := want(a)
	otherDisk.Outputs = map[string]string{}
	for k, v := range a.Digests() {
		otherDisk.Outputs[k] = v
	}
	otherDisk.Outputs[image.OutputDisk] = b.Digests()[image.OutputDisk]
	noOutputs := want(a)
	noOutputs.Outputs = nil
	for _, tc := range []struct {
		name    string
		want    Want
		tamper  bool
		wantErr string
	}{
		{"another build", other, false, "input hash"},
		{"another input hash", otherInput, false, "input hash"},
		{"another disk", otherDisk, false, "output disk"},
		{"no output hashes in the lock", noOutputs, false, "records no output hashes"},
		{"blobs that do not match", want(a), true, "sha256 checksum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tamper.Store(tc.tamper)
			defer tamper.Store(false)
			dst := openCache(t)
			_, err := Pull(ctx, host+"/team/agent:a", dst, tc.want, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("pull: %v, want an error saying %q", err, tc.wantErr)
			}
			if tc.wantErr == "records no output hashes" && !errors.Is(err, ErrNotLocked) {
				t.Errorf("%v is not ErrNotLocked", err)
			}
			if _, ok, _ := dst.OutputPath(a.BuildKey, image.ManifestFile); ok {
				t.Error("a refused pull left image.json in the cache")
			}
			outputs, _ := filepath.Glob(filepath.Join(dst.Root(), "outputs", "*", "*"))
			if len(outputs) > 0 {
				t.Errorf("a refused pull left %v", outputs)
			}
		})
	}
}

// An image.json from elsewhere must describe a build's own outputs.
func TestParseManifestRefuses(t *testing.T) {
	c := openCache(t)
	r := build(t, c, "a")
	data, err := os.ReadFile(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := image.ParseManifest(data); err != nil {
		t.Fatalf("a build's own image.json: %v", err)
	}
	for name, change := range map[string]func(m map[string]any){
		"a file outside":     func(m map[string]any) { out(m, "disk")["file"] = "../../x" },
		"another file":       func(m map[string]any) { out(m, "disk")["file"] = "vmlinuz" },
		"a bad digest":       func(m map[string]any) { out(m, "kernel")["digest"] = "md5:00" },
		"a build key path":   func(m map[string]any) { m["buildKey"] = "sha256:../../etc" },
		"an unknown field":   func(m map[string]any) { m["run"] = "sh" },
		"an output missing":  func(m map[string]any) { delete(m["outputs"].(map[string]any), "agent") },
		"an output too many": func(m map[string]any) { m["outputs"].(map[string]any)["extra"] = out(m, "disk") },
		"a negative size":    func(m map[string]any) { out(m, "disk")["size"] = -1 },
	} {
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		change(m)
		b, _ := json.Marshal(m)
		if _, err := image.ParseManifest(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func out(m map[string]any, name string) map[string]any {
	return m["outputs"].(map[string]any)[name].(map[string]any)
}
