package resolve

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/digest"
	"github.com/sbx-dev/sbx/internal/build/localsrc"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// dpkgStatus is where dpkg keeps its database of installed packages.
const dpkgStatus = "var/lib/dpkg/status"

// maxStatus bounds the dpkg status file read from a base image.
const maxStatus = 64 << 20

// baseDpkgStatus returns the dpkg status file of img's base image, pinned
// as pin, or nil when the base has none (or the image has no base). The
// layers are read from the top down: the first that holds the file, or
// deletes it or a directory above it (a whiteout), decides. Registry
// layers are verified by go-containerregistry, layout blobs here, against
// their digests as they are read.
func (s *Set) baseDpkgStatus(ctx context.Context, img *lang.Image, pin *lockfiles.Pin) ([]byte, error) {
	if img.Base == nil || pin == nil {
		return nil, nil
	}
	layers, done, err := s.baseLayers(ctx, img.Base, pin)
	if err != nil {
		return nil, fmt.Errorf("reading the base image's dpkg status: %w", err)
	}
	defer done()
	for i := len(layers) - 1; i >= 0; i-- {
		data, decided, err := statusInLayer(layers[i])
		if err != nil {
			return nil, fmt.Errorf("reading the base image's dpkg status: %w", err)
		}
		if decided {
			return data, nil
		}
	}
	return nil, nil
}

// layerOpener opens one layer's (possibly compressed) bytes, checked
// against its digest by the time they are read to the end.
type layerOpener func() (io.ReadCloser, error)

// baseLayers returns the layers of the base image, bottom first, and a
// function to call once they are read.
func (s *Set) baseLayers(ctx context.Context, src *lang.Source, pin *lockfiles.Pin) ([]layerOpener, func(), error) {
	nothing := func() {}
	switch src.Kind {
	case lang.SourceOCI:
		ref, err := name.ParseReference(src.Ref)
		if err != nil {
			return nil, nothing, err
		}
		r := s.resolvers[lang.SourceOCI].(*ociResolver)
		opts := append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(r.keychain)}, r.options...)
		im, err := remote.Image(ref.Context().Digest(pin.Manifest), opts...)
		if err != nil {
			return nil, nothing, err
		}
		ls, err := im.Layers()
		if err != nil {
			return nil, nothing, err
		}
		var out []layerOpener
		for _, l := range ls {
			out = append(out, l.Compressed)
		}
		return out, nothing, nil
	case lang.SourceOCILayout:
		l, err := localsrc.OpenLayout(s.dir, src)
		if err != nil {
			return nil, nothing, err
		}
		done := func() { l.Close() }
		h, err := v1.NewHash(pin.Manifest)
		if err != nil {
			done()
			return nil, nothing, err
		}
		raw, err := verifiedBlob(l, h)
		if err != nil {
			done()
			return nil, nothing, err
		}
		var m v1.Manifest
		if err := json.Unmarshal(raw, &m); err != nil {
			done()
			return nil, nothing, fmt.Errorf("%s: %w", l.Where(h), err)
		}
		var out []layerOpener
		for _, d := range m.Layers {
			d := d
			out = append(out, func() (io.ReadCloser, error) {
				rc, err := l.Blob(d.Digest)
				if err != nil {
					return nil, err
				}
				return &hashingReader{rc: rc, h: sha256.New(), want: d.Digest.Hex, what: l.Where(d.Digest)}, nil
			})
		}
		return out, done, nil
	}
	return nil, nothing, nil
}

// statusInLayer reports whether a layer decides the dpkg status (it holds
// the file, or whites it or a parent out) and the file's bytes.
func statusInLayer(open layerOpener) ([]byte, bool, error) {
	rc, err := open()
	if err != nil {
		return nil, false, err
	}
	defer rc.Close()
	dr, _, err := archive.Decompress(rc)
	if err != nil {
		return nil, false, err
	}
	defer dr.Close()
	tr := tar.NewReader(dr)
	var data []byte
	decided := false
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false, err
		}
		p := archive.CleanName(hdr.Name)
		dir, base := path.Split(p)
		switch {
		case p == dpkgStatus && (hdr.Typeflag == tar.TypeReg || hdr.Typeflag == 0):
			b, err := io.ReadAll(io.LimitReader(tr, maxStatus+1))
			if err != nil {
				return nil, false, err
			}
			if len(b) > maxStatus {
				return nil, false, fmt.Errorf("%s is larger than %d MiB", dpkgStatus, maxStatus>>20)
			}
			data, decided = b, true
		case strings.HasPrefix(base, ".wh.") && !decided:
			gone := path.Join(dir, strings.TrimPrefix(base, ".wh."))
			if base == ".wh..wh..opq" {
				gone = strings.TrimSuffix(dir, "/")
			}
			if gone == dpkgStatus || strings.HasPrefix(dpkgStatus, gone+"/") {
				decided = true
			}
		}
	}
	// Read to the end, so that the digest is checked.
	if _, err := io.Copy(io.Discard, dr); err != nil {
		return nil, false, err
	}
	return data, decided, nil
}

// hashingReader checks a blob's sha256 when it reaches its end.
type hashingReader struct {
	rc   io.ReadCloser
	h    hash.Hash
	want string
	what string
}

func (r *hashingReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.h.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(r.h.Sum(nil)); got != r.want {
			return n, &digest.MismatchError{Input: r.what, Algo: "sha256", Want: r.want, Got: got}
		}
	}
	return n, err
}

func (r *hashingReader) Close() error { return r.rc.Close() }
