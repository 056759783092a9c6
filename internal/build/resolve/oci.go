package resolve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sbx-dev/sbx/internal/build/digest"
	"github.com/sbx-dev/sbx/internal/build/localsrc"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// ociResolver pins registry references.
type ociResolver struct {
	keychain authn.Keychain
	options  []remote.Option
}

var _ Resolver = (*ociResolver)(nil)

func (r *ociResolver) Resolve(ctx context.Context, src *lang.Source, platform lang.Platform) (*lockfiles.Pin, error) {
	ref, err := name.ParseReference(src.Ref)
	if err != nil {
		return nil, err
	}
	opts := append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(r.keychain)}, r.options...)
	// Get checks that the manifest it receives hashes to the digest of a
	// digest reference, so a pinned reference is verified here.
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return nil, err
	}
	m := manifest{
		// The error already names the source, which is the reference.
		what:      "",
		mediaType: desc.MediaType,
		digest:    desc.Digest,
		raw:       desc.Manifest,
		config: func(v1.Hash) ([]byte, error) {
			img, err := desc.Image()
			if err != nil {
				return nil, err
			}
			// The remote image verifies the config blob against its digest.
			return img.RawConfigFile()
		},
	}
	return m.pin(platform)
}

// layoutResolver pins images in a local OCI image layout directory.
type layoutResolver struct {
	dir string
}

var _ Resolver = (*layoutResolver)(nil)

func (r *layoutResolver) Resolve(_ context.Context, src *lang.Source, platform lang.Platform) (*lockfiles.Pin, error) {
	l, err := localsrc.OpenLayout(r.dir, src)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	dir := l.Dir
	im, err := l.Index()
	if err != nil {
		return nil, err
	}
	desc, err := findInLayout(dir, im, src.Version)
	if err != nil {
		return nil, err
	}
	blob := func(h v1.Hash) ([]byte, error) { return verifiedBlob(l, h) }
	raw, err := blob(desc.Digest)
	if err != nil {
		return nil, err
	}
	what := dir
	if src.Version != "" {
		what += "@" + src.Version
	}
	m := manifest{what: what, mediaType: desc.MediaType, digest: desc.Digest, raw: raw, config: blob}
	return m.pin(platform)
}

// refNameAnnotation names an entry of a layout's index.json.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// maxManifest bounds a manifest or config blob read into memory.
const maxManifest = 16 << 20

// findInLayout picks the entry of index.json that version names: a
// "sha256:…" digest, a tag (the ref.name annotation, alone or at the end
// of a full reference), or, when empty, the only entry.
func findInLayout(dir string, im *v1.IndexManifest, version string) (v1.Descriptor, error) {
	if strings.HasPrefix(version, "sha256:") {
		h, err := v1.NewHash(version)
		if err != nil {
			return v1.Descriptor{}, err
		}
		for _, d := range im.Manifests {
			if d.Digest == h {
				return d, nil
			}
		}
		return v1.Descriptor{}, fmt.Errorf("%s/index.json has no entry %s", dir, version)
	}
	var tags []string
	for _, d := range im.Manifests {
		n := d.Annotations[refNameAnnotation]
		if n == "" {
			continue
		}
		tags = append(tags, n)
		if version != "" && (n == version || strings.HasSuffix(n, ":"+version)) {
			return d, nil
		}
	}
	if version == "" {
		if len(im.Manifests) == 1 {
			return im.Manifests[0], nil
		}
		return v1.Descriptor{}, fmt.Errorf("%s/index.json has %d entries; name one with :TAG or @sha256:… (tags: %s)",
			dir, len(im.Manifests), listOrNone(tags))
	}
	return v1.Descriptor{}, fmt.Errorf("%s/index.json has no entry tagged %q (tags: %s)", dir, version, listOrNone(tags))
}

// verifiedBlob reads a blob of a layout (a manifest or config, at most
// maxManifest bytes) and checks it hashes to its name.
func verifiedBlob(l *localsrc.Layout, h v1.Hash) ([]byte, error) {
	rc, err := l.Blob(h)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.Where(h), err)
	}
	if len(b) > maxManifest {
		return nil, fmt.Errorf("%s: larger than %d bytes, too large for a manifest or config", l.Where(h), maxManifest)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != h.Hex {
		return nil, &digest.MismatchError{Input: l.Where(h), Algo: "sha256", Want: h.Hex, Got: got}
	}
	return b, nil
}

// manifest is a verified top-level manifest (an index or an image
// manifest) and a way to read the config blob an image manifest names.
type manifest struct {
	what      string // prefix for messages (the layout read), or ""
	mediaType types.MediaType
	digest    v1.Hash
	raw       []byte
	config    func(v1.Hash) ([]byte, error)
}

// pin chooses the platform's image: from an index, the entry for the
// platform; for a single manifest, the manifest itself after checking its
// config is for that platform.
func (m manifest) pin(want lang.Platform) (*lockfiles.Pin, error) {
	switch {
	case m.mediaType.IsIndex():
		im, err := v1.ParseIndexManifest(bytes.NewReader(m.raw))
		if err != nil {
			return nil, m.errorf("%w", err)
		}
		d, err := selectPlatform(im.Manifests, want)
		if err != nil {
			return nil, m.errorf("%w", err)
		}
		return &lockfiles.Pin{Digest: m.digest.String(), Manifest: d.Digest.String()}, nil
	case m.mediaType.IsImage():
		mf, err := v1.ParseManifest(bytes.NewReader(m.raw))
		if err != nil {
			return nil, m.errorf("%w", err)
		}
		if err := m.checkConfigPlatform(mf, want); err != nil {
			return nil, err
		}
		return &lockfiles.Pin{Digest: m.digest.String(), Manifest: m.digest.String()}, nil
	case m.mediaType.IsSchema1():
		return nil, m.errorf("Docker schema 1 manifests are not supported; push the image again with a current client")
	}
	return nil, m.errorf("media type %q is neither an image index nor an image manifest", m.mediaType)
}

// checkConfigPlatform checks a single image's config is for want. An
// artifact whose config is not an image config, or an image config that
// names no platform, makes no claim and is accepted.
func (m manifest) checkConfigPlatform(mf *v1.Manifest, want lang.Platform) error {
	if mt := mf.Config.MediaType; mt != types.OCIConfigJSON && mt != types.DockerConfigJSON {
		return nil
	}
	raw, err := m.config(mf.Config.Digest)
	if err != nil {
		return m.errorf("config: %w", err)
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(raw))
	if err != nil {
		return m.errorf("config: %w", err)
	}
	if cfg.OS == "" && cfg.Architecture == "" {
		return nil
	}
	got := cfg.Platform()
	if !platformMatches(got, want) {
		return m.errorf("a single-platform image for %s, not %s", formatPlatform(got), want)
	}
	return nil
}

// errorf formats an error prefixed with what was read, if known.
func (m manifest) errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if m.what == "" {
		return err
	}
	return fmt.Errorf("%s: %w", m.what, err)
}

// selectPlatform returns the first index entry for want, or an error
// listing the platforms the index has.
func selectPlatform(descs []v1.Descriptor, want lang.Platform) (v1.Descriptor, error) {
	var have []string
	seen := map[string]bool{}
	for _, d := range descs {
		if platformMatches(d.Platform, want) {
			if !d.MediaType.IsImage() && !d.MediaType.IsIndex() && d.MediaType != "" {
				return v1.Descriptor{}, fmt.Errorf("the index entry for %s has media type %q, not an image manifest", want, d.MediaType)
			}
			if d.MediaType.IsIndex() {
				return v1.Descriptor{}, fmt.Errorf("the index entry for %s is itself an index; nested indexes are not supported", want)
			}
			return d, nil
		}
		if d.Platform == nil || d.Platform.OS == "unknown" {
			continue // attestations and other non-image entries
		}
		s := formatPlatform(d.Platform)
		if !seen[s] {
			seen[s] = true
			have = append(have, s)
		}
	}
	sort.Strings(have)
	return v1.Descriptor{}, fmt.Errorf("the index has no image for %s (available: %s)", want, listOrNone(have))
}

// platformMatches compares OS, architecture and variant, with the
// variant defaults the OCI ecosystem assumes (arm64 is v8, arm is v7).
func platformMatches(p *v1.Platform, want lang.Platform) bool {
	if p == nil {
		return false
	}
	return p.OS == want.OS && p.Architecture == want.Architecture &&
		normVariant(p.Architecture, p.Variant) == normVariant(want.Architecture, want.Variant)
}

func normVariant(arch, variant string) string {
	if variant != "" {
		return variant
	}
	switch arch {
	case "arm64":
		return "v8"
	case "arm":
		return "v7"
	case "amd64":
		return "v1"
	}
	return ""
}

func formatPlatform(p *v1.Platform) string {
	if p == nil {
		return "(no platform)"
	}
	return lang.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant}.String()
}

func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}
