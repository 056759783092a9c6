package imagereg

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/image"
)

// Media types of an image's artifact.
const (
	// ArtifactType is the manifest's artifactType.
	ArtifactType = "application/vnd.sbx.image.v1"
	// ConfigMediaType is the config blob's: the build's image.json.
	ConfigMediaType = "application/vnd.sbx.image.config.v1+json"
	// OutputMediaTypePrefix begins each output layer's media type,
	// which ends in the output's name: ...output.v1.disk.
	OutputMediaTypePrefix = "application/vnd.sbx.image.output.v1."
	// OutputAnnotation names the output a layer holds.
	OutputAnnotation = "dev.sbx.image.output"
)

// Options are how a registry is reached.
type Options struct {
	// Keychain gives credentials per registry; nil means anonymous.
	Keychain authn.Keychain
	// Remote are further go-containerregistry options (a transport).
	Remote []remote.Option
}

func (o Options) remote(ctx context.Context) []remote.Option {
	kc := o.Keychain
	if kc == nil {
		kc = authn.NewMultiKeychain()
	}
	return append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)}, o.Remote...)
}

// Push uploads the build r (its outputs and image.json, from the cache)
// as an artifact to ref (a tag or repository; a bare repository is
// tagged with the build key's first 12 hex digits) and returns the
// manifest's digest reference, which pins those bytes.
func Push(ctx context.Context, r *image.Result, ref string, opts Options) (name.Digest, error) {
	tag, err := pushRef(ref, r.BuildKey)
	if err != nil {
		return name.Digest{}, err
	}
	data, err := os.ReadFile(r.Manifest)
	if err != nil {
		return name.Digest{}, err
	}
	m, err := image.ParseManifest(data)
	if err != nil {
		return name.Digest{}, fmt.Errorf("%s: %w", r.Manifest, err)
	}
	ro := opts.remote(ctx)
	repo := tag.Context()
	cfg := &blob{data: data, mediaType: ConfigMediaType}
	if err := remote.WriteLayer(repo, cfg, ro...); err != nil {
		return name.Digest{}, fmt.Errorf("pushing image.json to %s: %w", repo, err)
	}
	man := ocispec.Manifest{
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: ArtifactType,
		Config:       ocispec.Descriptor{MediaType: ConfigMediaType, Digest: digest.Digest(cfg.digest()), Size: int64(len(data))},
		Annotations:  map[string]string{"org.opencontainers.image.title": m.Image},
	}
	man.SchemaVersion = 2
	for _, out := range image.OutputOrder() {
		o, ok := r.Outputs[out]
		if !ok || o.Digest != m.Outputs[out].Digest {
			return name.Digest{}, fmt.Errorf("output %s of %s is not the one its image.json records", out, r.Manifest)
		}
		l := &blob{path: o.Path, size: o.Size, sum: o.Digest, mediaType: types.MediaType(OutputMediaTypePrefix + out)}
		if err := remote.WriteLayer(repo, l, ro...); err != nil {
			return name.Digest{}, fmt.Errorf("pushing output %s to %s: %w", out, repo, err)
		}
		man.Layers = append(man.Layers, ocispec.Descriptor{
			MediaType: string(l.mediaType), Digest: digest.Digest(o.Digest), Size: o.Size,
			Annotations: map[string]string{OutputAnnotation: out, ocispec.AnnotationTitle: filepath.Base(o.Path)},
		})
	}
	raw, err := json.Marshal(man)
	if err != nil {
		return name.Digest{}, err
	}
	if err := remote.Put(tag, rawManifest(raw), ro...); err != nil {
		return name.Digest{}, fmt.Errorf("pushing the manifest to %s: %w", tag, err)
	}
	sum := sha256.Sum256(raw)
	return repo.Digest("sha256:" + hex.EncodeToString(sum[:])), nil
}

// pushRef is ref as a tag: a bare repository gets the build key's tag.
func pushRef(ref, buildKey string) (name.Tag, error) {
	if d, err := name.NewDigest(ref); err == nil {
		return name.Tag{}, fmt.Errorf("push to a tag or repository, not a digest (%s): the manifest's digest is known once it is pushed", d)
	}
	t, err := name.NewTag(ref, name.WithDefaultTag(""))
	if err != nil {
		return name.Tag{}, fmt.Errorf("%q is not a registry reference: %w", ref, err)
	}
	if t.TagStr() == "" {
		hexKey, err := cache.ParseDigest(buildKey)
		if err != nil {
			return name.Tag{}, err
		}
		t = t.Context().Tag("sbx-" + hexKey[:12])
	}
	return t, nil
}

// Want is what a fetched build must be: the lock's record of it.
type Want struct {
	// Image is the image block's name.
	Image string
	// InputHash is the recipe input hash the lock records.
	InputHash string
	// Outputs are the output digests the lock records, by output name
	// (image.LockedOutputs: all of them).
	Outputs map[string]string
}

// ErrNotLocked is Pull's error when Want names no outputs.
var ErrNotLocked = errors.New("the lock file records no output hashes for this image: build it once (sbx build) so that the lock names the bytes a fetched copy must have")

// MismatchError is Pull's error for an artifact that is not the build
// the lock records.
type MismatchError struct {
	Ref  string
	What string // "input hash", "output disk", "image"
	Want string
	Got  string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s is not the build the lock file records: its %s is %s, the lock's %s", e.Ref, e.What, e.Got, e.Want)
}

// Pull fetches the image artifact at ref (a tag or digest) into c, after
// checking it is the build want describes, and returns it as stored.
// Nothing is stored unless everything verifies.
func Pull(ctx context.Context, ref string, c *cache.Cache, want Want, opts Options) (*image.Result, error) {
	for _, out := range image.LockedOutputs {
		if want.Outputs[out] == "" {
			return nil, ErrNotLocked
		}
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("%q is not a registry reference: %w", ref, err)
	}
	ro := opts.remote(ctx)
	desc, err := remote.Get(r, ro...)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", r, err)
	}
	if desc.MediaType != types.OCIManifestSchema1 {
		return nil, fmt.Errorf("%s is a %s, not an sbx image (an OCI image manifest of artifactType %s)", r, desc.MediaType, ArtifactType)
	}
	var man ocispec.Manifest
	if err := json.Unmarshal(desc.Manifest, &man); err != nil {
		return nil, fmt.Errorf("%s: its manifest: %w", r, err)
	}
	if man.ArtifactType != ArtifactType || man.Config.MediaType != ConfigMediaType {
		return nil, fmt.Errorf("%s is not an sbx image: artifactType %q, config %q (want %s, %s)", r, man.ArtifactType, man.Config.MediaType, ArtifactType, ConfigMediaType)
	}
	if man.Config.Size > image.MaxManifestSize {
		return nil, fmt.Errorf("%s: its image.json is %d bytes, more than an image's manifest", r, man.Config.Size)
	}
	repo := r.Context()
	var cfg bytes.Buffer
	if err := fetchBlob(repo, string(man.Config.Digest), man.Config.Size, &cfg, ro); err != nil {
		return nil, fmt.Errorf("%s: its image.json: %w", r, err)
	}
	m, err := image.ParseManifest(cfg.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r, err)
	}
	if m.Image != want.Image && want.Image != "" {
		return nil, &MismatchError{Ref: r.String(), What: "image", Want: want.Image, Got: m.Image}
	}
	if m.InputHash != want.InputHash {
		return nil, &MismatchError{Ref: r.String(), What: "input hash", Want: want.InputHash, Got: m.InputHash}
	}
	for _, out := range image.LockedOutputs {
		if got := m.Outputs[out].Digest; got != want.Outputs[out] {
			return nil, &MismatchError{Ref: r.String(), What: "output " + out, Want: want.Outputs[out], Got: got}
		}
	}
	layers := map[string]ocispec.Descriptor{}
	for _, l := range man.Layers {
		out := l.Annotations[OutputAnnotation]
		if _, dup := layers[out]; dup || l.MediaType != OutputMediaTypePrefix+out {
			return nil, fmt.Errorf("%s: layer %s is not one output's (media type %s, output %q)", r, l.Digest, l.MediaType, out)
		}
		if o, ok := m.Outputs[out]; !ok || string(l.Digest) != o.Digest || l.Size != o.Size {
			return nil, fmt.Errorf("%s: layer %s of output %q is not the one its image.json records", r, l.Digest, out)
		}
		layers[out] = l
	}
	if len(layers) != len(m.Outputs) {
		return nil, fmt.Errorf("%s: %d output layers, its image.json records %d outputs", r, len(layers), len(m.Outputs))
	}
	return image.Import(ctx, c, cfg.Bytes(), func(ctx context.Context, out string, w io.Writer) error {
		l := layers[out]
		return fetchBlob(repo, string(l.Digest), l.Size, w, ro)
	})
}

// fetchBlob copies the blob d of repo to w, at most size bytes, and
// checks its digest and size.
func fetchBlob(repo name.Repository, d string, size int64, w io.Writer, ro []remote.Option) error {
	if _, err := v1.NewHash(d); err != nil {
		return err
	}
	l, err := remote.Layer(repo.Digest(d), ro...)
	if err != nil {
		return err
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(rc, size+1))
	if err != nil {
		return err
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != d || n != size {
		return fmt.Errorf("blob %s: the registry sent %d bytes of %s, want %d", d, n, got, size)
	}
	return nil
}

// rawManifest is a manifest to put as it is.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// blob is a file's or a buffer's bytes as a layer, uploaded as they are.
type blob struct {
	data      []byte // or
	path      string
	size      int64
	sum       string // "sha256:<hex>" of path's bytes
	mediaType types.MediaType
}

var _ v1.Layer = (*blob)(nil)

func (b *blob) digest() string {
	if b.path != "" {
		return b.sum
	}
	s := sha256.Sum256(b.data)
	return "sha256:" + hex.EncodeToString(s[:])
}

func (b *blob) Digest() (v1.Hash, error) { return v1.NewHash(b.digest()) }
func (b *blob) DiffID() (v1.Hash, error) { return b.Digest() }
func (b *blob) Size() (int64, error) {
	if b.path != "" {
		return b.size, nil
	}
	return int64(len(b.data)), nil
}
func (b *blob) MediaType() (types.MediaType, error)  { return b.mediaType, nil }
func (b *blob) Uncompressed() (io.ReadCloser, error) { return b.Compressed() }
func (b *blob) Compressed() (io.ReadCloser, error) {
	if b.path == "" {
		return io.NopCloser(bytes.NewReader(b.data)), nil
	}
	return os.Open(b.path)
}
