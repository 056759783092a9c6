package image

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// MaxManifestSize bounds an image.json read from elsewhere (ParseManifest).
const MaxManifestSize = 4 << 20

// OutputOrder returns the names of a build's outputs in the order they
// are stored and listed.
func OutputOrder() []string { return slices.Clone(outputOrder) }

// ParseManifest reads an image.json that came from elsewhere (a
// registry): unknown fields, another version, a build key or input hash
// that is no digest, and outputs other than a build's own (each under
// its own file name, with a sha256 digest and a size) are errors.
func ParseManifest(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("image.json: %d bytes, more than an image's manifest (%d)", len(data), MaxManifestSize)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("image.json: %w", err)
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("image.json: manifest version %d, want %d", m.Version, ManifestVersion)
	}
	if m.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("image.json: made by an image format %d builder; this sbx builds format %d", m.FormatVersion, FormatVersion)
	}
	for what, d := range map[string]string{"build key": m.BuildKey, "input hash": m.InputHash} {
		if _, err := cache.ParseDigest(d); err != nil {
			return nil, fmt.Errorf("image.json: %s: %w", what, err)
		}
	}
	if len(m.Outputs) != len(outputOrder) {
		return nil, fmt.Errorf("image.json: %d outputs, want %d (%v)", len(m.Outputs), len(outputOrder), outputOrder)
	}
	for _, name := range outputOrder {
		o, ok := m.Outputs[name]
		switch {
		case !ok:
			return nil, fmt.Errorf("image.json: no output %s", name)
		case o.File != outputFiles[name]:
			return nil, fmt.Errorf("image.json: output %s is file %q, want %q", name, o.File, outputFiles[name])
		case o.Size < 0:
			return nil, fmt.Errorf("image.json: output %s has size %d", name, o.Size)
		}
		if _, err := cache.ParseDigest(o.Digest); err != nil {
			return nil, fmt.Errorf("image.json: output %s: %w", name, err)
		}
	}
	return &m, nil
}

// Import stores a build made elsewhere in c, under its manifest's build
// key, as Build stores its own: fetch writes output name's bytes to w,
// each checked against the manifest's digest and size as it is stored,
// and the manifest (data, which ParseManifest must accept) is stored last,
// so the build is in the cache whole or not at all. A later Build of the
// same key finds it. On any error nothing of it is left in the cache;
// an earlier build under the key is replaced only once every output
// verified.
func Import(ctx context.Context, c *cache.Cache, data []byte, fetch func(ctx context.Context, name string, w io.Writer) error) (*Result, error) {
	m, err := ParseManifest(data)
	if err != nil {
		return nil, err
	}
	// The outputs are staged under their digests in the blob store
	// (Put checks each), then copied under the build key.
	staged := map[string]string{}
	for _, name := range outputOrder {
		o := m.Outputs[name]
		if _, err := c.Put(ctx, o.Digest, func(w io.Writer) error { return fetch(ctx, name, w) }); err != nil {
			return nil, fmt.Errorf("output %s: %w", name, err)
		}
		p, _ := c.Path(o.Digest)
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", name, err)
		}
		if fi.Size() != o.Size {
			return nil, fmt.Errorf("output %s: %d bytes, the manifest says %d", name, fi.Size(), o.Size)
		}
		staged[name] = p
	}
	var stored []string
	undo := func(err error) (*Result, error) {
		for _, p := range stored {
			os.Remove(p)
		}
		if p, _, perr := c.OutputPath(m.BuildKey, ManifestFile); perr == nil {
			os.Remove(filepath.Dir(p))
		}
		return nil, err
	}
	// A manifest already there would make a half-replaced build look
	// whole: it goes first.
	if p, ok, err := c.OutputPath(m.BuildKey, ManifestFile); err == nil && ok {
		if err := os.Remove(p); err != nil {
			return nil, err
		}
	}
	for _, name := range outputOrder {
		o := m.Outputs[name]
		p, digest, err := c.PutOutput(ctx, m.BuildKey, o.File, copyFrom(staged[name]))
		if err != nil {
			return undo(fmt.Errorf("storing output %s: %w", name, err))
		}
		stored = append(stored, p)
		if digest != o.Digest {
			return undo(fmt.Errorf("output %s changed in the cache while it was stored: %s, then %s", name, o.Digest, digest))
		}
	}
	mpath, _, err := c.PutOutput(ctx, m.BuildKey, ManifestFile, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return undo(fmt.Errorf("storing %s: %w", ManifestFile, err))
	}
	return m.result(mpath), nil
}

// BuildKey is the key Build would keep img's outputs under, as lock pins
// it, with opts' guest agent and epoch: a build fetched from elsewhere
// (Import) is found by Build only under this key. It builds and fetches
// nothing.
func BuildKey(img *lang.Image, lock *lockfiles.Image, opts Options) (string, error) {
	b, err := prepare(img, lock, opts)
	if err != nil {
		return "", err
	}
	return b.key, nil
}
