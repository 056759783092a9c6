package fetch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sbx-dev/sbx/internal/build/localsrc"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// blobSource opens blobs of one image by digest: a registry repository or
// an OCI layout directory. Opened blobs are verified again by the cache.
type blobSource interface {
	// manifest returns the raw manifest with the given digest.
	manifest(ctx context.Context, h v1.Hash) ([]byte, error)
	// blob opens the blob with the given digest.
	blob(ctx context.Context, h v1.Hash) (io.ReadCloser, error)
	// where names the source in errors.
	where(h v1.Hash) string
}

// image fetches the platform manifest a pin names, its config and its
// layers. The source is only contacted for what the cache lacks.
func (f *fetcher) image(ctx context.Context, key string, src *lang.Source, pin *lockfiles.Pin) (Fetched, error) {
	if pin.Manifest == "" {
		return Fetched{}, fmt.Errorf("the lock records no manifest digest: run sbx lock")
	}
	md, err := v1.NewHash(pin.Manifest)
	if err != nil || md.Algorithm != "sha256" {
		return Fetched{}, fmt.Errorf("the lock's manifest digest %q is not a sha256 digest", pin.Manifest)
	}
	var bs blobSource // made on first need, so that a warm cache contacts nothing
	source := func() (blobSource, error) {
		if bs != nil {
			return bs, nil
		}
		var err error
		if src.Kind == lang.SourceOCILayout {
			bs, err = f.layoutSource(src)
		} else {
			bs, err = f.registrySource(ctx, src)
		}
		return bs, err
	}
	defer func() {
		if c, ok := bs.(io.Closer); ok {
			c.Close()
		}
	}()

	mpath, ok := f.c.Path(md.String())
	if !ok {
		s, err := source()
		if err != nil {
			return Fetched{}, err
		}
		raw, err := s.manifest(ctx, md)
		if err != nil {
			return Fetched{}, err
		}
		mpath, err = f.c.Put(ctx, md.String(), func(w io.Writer) error {
			_, err := w.Write(raw)
			return err
		})
		if err != nil {
			return Fetched{}, mismatch(s.where(md), "", err)
		}
	}
	raw, err := os.ReadFile(mpath)
	if err != nil {
		return Fetched{}, err
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return Fetched{}, fmt.Errorf("manifest %s: %w", md, err)
	}
	if m.MediaType.IsIndex() || len(m.Layers) == 0 && m.Config.Digest.Hex == "" {
		return Fetched{}, fmt.Errorf("manifest %s is not an image manifest", md)
	}

	descs := append([]v1.Descriptor{m.Config}, m.Layers...)
	var missing, total int64
	for _, d := range descs {
		if d.Digest.Algorithm != "sha256" {
			return Fetched{}, fmt.Errorf("manifest %s: blob %s: only sha256 digests are supported", md, d.Digest)
		}
		if !f.c.Has(d.Digest.String()) {
			missing++
			total += d.Size
		}
	}
	out := Fetched{Manifest: &Blob{Digest: md.String(), MediaType: string(m.MediaType), Size: int64(len(raw)), Path: mpath}}
	pw := &progressWriter{key: key, total: total, report: f.opts.Progress}
	if missing > 0 {
		pw.tick(0)
	}
	for i, d := range descs {
		p, ok := f.c.Path(d.Digest.String())
		if !ok {
			s, err := source()
			if err != nil {
				return Fetched{}, err
			}
			p, err = f.putBlob(ctx, s, d, pw)
			if err != nil {
				return Fetched{}, err
			}
			f.log.Debug("fetched", "input", key, "digest", d.Digest.String(), "bytes", d.Size)
		}
		b := Blob{Digest: d.Digest.String(), MediaType: string(d.MediaType), Size: d.Size, Path: p}
		if i == 0 {
			out.Config = &b
		} else {
			out.Layers = append(out.Layers, b)
		}
	}
	return out, nil
}

// putBlob copies one blob into the cache, checking its size and digest.
func (f *fetcher) putBlob(ctx context.Context, s blobSource, d v1.Descriptor, pw *progressWriter) (string, error) {
	p, err := f.c.Put(ctx, d.Digest.String(), func(w io.Writer) error {
		rc, err := s.blob(ctx, d.Digest)
		if err != nil {
			return err
		}
		defer rc.Close()
		pw.w = w
		n, err := io.Copy(pw, io.LimitReader(rc, d.Size+1))
		if err != nil {
			return fmt.Errorf("%s: failed after %d of %d bytes: %w", s.where(d.Digest), n, d.Size, err)
		}
		if n != d.Size {
			return fmt.Errorf("%s: got %d bytes, the manifest says %d", s.where(d.Digest), n, d.Size)
		}
		return nil
	})
	if err != nil {
		return "", mismatch(s.where(d.Digest), "", err)
	}
	return p, nil
}

// remoteRepo is a repository of an OCI registry.
type remoteRepo struct {
	repo name.Repository
	opts []remote.Option
}

func (f *fetcher) registrySource(ctx context.Context, src *lang.Source) (blobSource, error) {
	ref, err := name.ParseReference(src.Ref)
	if err != nil {
		return nil, err
	}
	opts := append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(f.opts.Keychain)}, f.opts.OCIOptions...)
	return &remoteRepo{repo: ref.Context(), opts: opts}, nil
}

func (r *remoteRepo) where(h v1.Hash) string { return r.repo.Digest(h.String()).String() }

func (r *remoteRepo) manifest(ctx context.Context, h v1.Hash) ([]byte, error) {
	// Get checks the manifest hashes to the digest asked for.
	desc, err := remote.Get(r.repo.Digest(h.String()), append(r.opts, remote.WithContext(ctx))...)
	if err != nil {
		return nil, err
	}
	return desc.Manifest, nil
}

func (r *remoteRepo) blob(ctx context.Context, h v1.Hash) (io.ReadCloser, error) {
	l, err := remote.Layer(r.repo.Digest(h.String()), append(r.opts, remote.WithContext(ctx))...)
	if err != nil {
		return nil, err
	}
	return l.Compressed()
}

// layoutDir is a local OCI image layout, opened inside its confining
// directory (localsrc.OpenLayout).
type layoutDir struct {
	l *localsrc.Layout
}

func (f *fetcher) layoutSource(src *lang.Source) (blobSource, error) {
	l, err := localsrc.OpenLayout(f.opts.Dir, src)
	if err != nil {
		return nil, err
	}
	return &layoutDir{l: l}, nil
}

func (l *layoutDir) where(h v1.Hash) string { return l.l.Where(h) }

func (l *layoutDir) manifest(_ context.Context, h v1.Hash) ([]byte, error) {
	rc, err := l.l.Blob(h)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, maxManifest))
}

func (l *layoutDir) blob(_ context.Context, h v1.Hash) (io.ReadCloser, error) {
	return l.l.Blob(h)
}

func (l *layoutDir) Close() error { return l.l.Close() }

// maxManifest bounds a manifest read into memory.
const maxManifest = 16 << 20
