package digest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/sbx-dev/sbx/internal/ctxio"
)

// File returns the lowercase hex sha256 of the regular file at path and
// its size. Errors name the path; ctx's error is returned once ctx ends.
func File(ctx context.Context, path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err // *fs.PathError names the path
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	if !fi.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s is not a regular file", path)
	}
	sum, n, err := Reader(ctx, f)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", path, err)
	}
	return sum, n, nil
}

// Reader returns the lowercase hex sha256 of what r holds and its length,
// reading until EOF or until ctx ends.
func Reader(ctx context.Context, r io.Reader) (string, int64, error) {
	h := sha256.New()
	n, err := io.Copy(h, ctxio.Reader(ctx, r))
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// MismatchError reports content that does not match what it was pinned or
// declared to be.
type MismatchError struct {
	Input string // the URL or path that was read, without credentials
	Algo  string // "sha256", "sha512", "sha1", "size"
	Want  string
	Got   string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s: %s mismatch: want %s, got %s", e.Input, e.Algo, e.Want, e.Got)
}
