package rootfs

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/archive/archivetest"
	"github.com/sbx-dev/sbx/internal/build/fetch"
	"github.com/sbx-dev/sbx/internal/build/layers"
	"github.com/sbx-dev/sbx/lang"
)

// ent is one entry of a tar the tests write: a header and, for a regular
// file, its body.
type ent struct {
	hdr  tar.Header
	body string
}

func dirEnt(name string, mode int64) ent {
	return ent{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode}}
}

func fileEnt(name string, mode int64, uid, gid int, body string) ent {
	return ent{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Uid: uid, Gid: gid}, body: body}
}

func symEnt(name, target string) ent {
	return ent{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}}
}

func linkEnt(name, target string) ent {
	return ent{hdr: tar.Header{Typeflag: tar.TypeLink, Name: name, Linkname: target}}
}

// tarOf writes ents as a PAX tar stream.
func tarOf(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := e.hdr
		h.Format = tar.FormatPAX
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gz(t testing.TB, b []byte) []byte { return archivetest.Compress(t, archive.Gzip, b) }

// blobFile writes data into dir under its digest, as the cache would.
func blobFile(t testing.TB, dir string, data []byte, mediaType string) fetch.Blob {
	t.Helper()
	sum := sha256.Sum256(data)
	p := filepath.Join(dir, hex.EncodeToString(sum[:]))
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return fetch.Blob{Digest: "sha256:" + hex.EncodeToString(sum[:]), MediaType: mediaType, Size: int64(len(data)), Path: p}
}

// ociInput is a fetched OCI image: gzipped layers and a config holding env.
func ociInput(t testing.TB, dir string, env []string, layerTars ...[]byte) fetch.Fetched {
	t.Helper()
	cfg := v1.ConfigFile{OS: "linux", Architecture: "amd64", Config: v1.Config{Env: env}}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	in := fetch.Fetched{Kind: lang.SourceOCI}
	var m v1.Manifest
	m.SchemaVersion = 2
	m.MediaType = types.OCIManifestSchema1
	c := blobFile(t, dir, cfgJSON, string(types.OCIConfigJSON))
	in.Config = &c
	for _, l := range layerTars {
		b := blobFile(t, dir, gz(t, l), string(types.OCILayer))
		in.Layers = append(in.Layers, b)
		h, _ := v1.NewHash(b.Digest)
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: types.OCILayer, Size: b.Size, Digest: h})
	}
	mJSON, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	mb := blobFile(t, dir, mJSON, string(types.OCIManifestSchema1))
	in.Manifest = &mb
	return in
}

// fileInput is a fetched npm, url, file or deb input.
func fileInput(t testing.TB, dir string, kind lang.SourceKind, data []byte) fetch.Fetched {
	b := blobFile(t, dir, data, "")
	return fetch.Fetched{Kind: kind, File: &b}
}

// loadImage loads a spec holding image "agent" with lang, as sbx does.
func loadImage(t testing.TB, spec string) *lang.Image {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "agent.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatalf("loading the spec: %s", diags.Error())
	}
	img := cfg.Images["agent"]
	if img == nil {
		t.Fatal("the spec has no image \"agent\"")
	}
	return img
}

// tarFile is one entry of an assembled tree's tar stream.
type tarFile struct {
	hdr  *tar.Header
	body string
}

// readTar parses a tar stream into its entries by absolute path, and
// their order.
func readTar(t testing.TB, b []byte) (map[string]tarFile, []string) {
	t.Helper()
	files := map[string]tarFile{}
	var order []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		p := "/" + strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		if h.Name == "./" {
			p = "/"
		}
		if _, dup := files[p]; dup {
			t.Errorf("%s appears twice in the stream", p)
		}
		files[p] = tarFile{hdr: h, body: string(body)}
		order = append(order, p)
	}
	return files, order
}

// assembleTar assembles img and returns the tar stream.
func assembleTar(t testing.TB, img *lang.Image, in Inputs, opts Options) []byte {
	t.Helper()
	tree, err := Assemble(context.Background(), img, in, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	return writeTar(t, tree)
}

func writeTar(t testing.TB, tree *layers.Tree) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := tree.WriteTar(&buf, 1700000000); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
