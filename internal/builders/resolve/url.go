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
	"os"
	"strings"

	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/lockfiles"
)

// urlResolver pins https downloads by their sha256. A declared sha256 is
// checked; without one the first download's hash is recorded (trust on
// first use) and later locks keep it.
type urlResolver struct {
	client *http.Client
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
	got, err := FetchVerified(ctx, httpsOnly(r.client), src.Ref, Want{SHA256: want}, io.Discard)
	if err != nil {
		return nil, err
	}
	return &lockfiles.Pin{SHA256: got.SHA256}, nil
}

// httpsOnly returns a copy of client that refuses redirects away from
// https, so a first download trusted without a declared hash cannot be
// downgraded to plain http on the way.
func httpsOnly(client *http.Client) *http.Client {
	c := *client
	next := client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != "https" {
			return fmt.Errorf("refused redirect to %s: only https", redactURL(req.URL.String()))
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &c
}

// fileResolver pins local files by their sha256.
type fileResolver struct {
	dir string
}

var _ Resolver = (*fileResolver)(nil)

func (r *fileResolver) Resolve(_ context.Context, src *lang.Source, _ lang.Platform) (*lockfiles.Pin, error) {
	want, err := declaredSHA256(src)
	if err != nil {
		return nil, err
	}
	f, path, err := OpenLocalFile(r.dir, src)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	got, err := hashReader(f, path, want)
	if err != nil {
		return nil, err
	}
	return &lockfiles.Pin{SHA256: got}, nil
}

// hashFile returns the hex sha256 of a regular file and checks it against
// want when want is set. Errors name the path.
func hashFile(path, want string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err // *fs.PathError names the path
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	return hashReader(f, path, want)
}

// hashReader returns the hex sha256 of what r holds and checks it against
// want when want is set. path names r in errors.
func hashReader(r io.Reader, path, want string) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if want != "" && got != want {
		return "", &MismatchError{Input: path, Algo: "sha256", Want: want, Got: got}
	}
	return got, nil
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
