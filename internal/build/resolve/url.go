package resolve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/digest"
	"github.com/sbx-dev/sbx/internal/build/download"
	"github.com/sbx-dev/sbx/internal/build/localsrc"
	"github.com/sbx-dev/sbx/internal/build/mirror"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// urlResolver pins https downloads by their sha256. A declared sha256 is
// checked; without one the first download's hash is recorded (trust on
// first use) and later locks keep it. A declared sha256 that a file in
// mirrorDir has is pinned without a download (package
// internal/build/mirror).
type urlResolver struct {
	client    *http.Client
	mirrorDir string
}

var _ Resolver = (*urlResolver)(nil)

func (r *urlResolver) Resolve(ctx context.Context, src *lang.Source, _ lang.Platform) (*lockfiles.Pin, error) {
	u, err := url.Parse(src.Ref)
	if err != nil {
		return nil, errors.New("invalid URL")
	}
	if u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("only https URLs can be sources, not %q", u.Scheme+"://")
	}
	want, err := declaredSHA256(src)
	if err != nil {
		return nil, err
	}
	found, err := mirror.Find(ctx, r.mirrorDir, src.Ref, want)
	if err != nil {
		return nil, err
	}
	if found.Path != "" {
		return &lockfiles.Pin{SHA256: want}, nil
	}
	got, err := download.Get(ctx, download.HTTPSOnly(r.client), src.Ref, nil, download.Want{SHA256: want}, io.Discard)
	if err != nil {
		var me *digest.MismatchError
		if errors.As(err, &me) || ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w. %s", err, mirror.Hint(src, want, r.mirrorDir, found))
	}
	return &lockfiles.Pin{SHA256: got.SHA256}, nil
}

// fileResolver pins local files by their sha256.
type fileResolver struct {
	dir string
}

var _ Resolver = (*fileResolver)(nil)

func (r *fileResolver) Resolve(ctx context.Context, src *lang.Source, _ lang.Platform) (*lockfiles.Pin, error) {
	want, err := declaredSHA256(src)
	if err != nil {
		return nil, err
	}
	f, path, err := localsrc.OpenFile(r.dir, src)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	got, _, err := digest.Reader(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if want != "" && got != want {
		return nil, &digest.MismatchError{Input: path, Algo: "sha256", Want: want, Got: got}
	}
	return &lockfiles.Pin{SHA256: got}, nil
}

// declaredSHA256 returns the sha256 the spec declares for src, lower-case
// hex without a "sha256:" prefix, or "".
func declaredSHA256(src *lang.Source) (string, error) {
	if src.SHA256 == "" {
		return "", nil
	}
	s := strings.ToLower(strings.TrimPrefix(src.SHA256, "sha256:"))
	if len(s) != sha256.Size*2 {
		return "", fmt.Errorf("declared sha256 %q is not 64 hex digits", src.SHA256)
	}
	if _, err := hex.DecodeString(s); err != nil {
		return "", fmt.Errorf("declared sha256 %q is not 64 hex digits", src.SHA256)
	}
	return s, nil
}
