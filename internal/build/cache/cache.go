package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbx-dev/sbx/internal/ctxio"
)

// EnvRoot is the environment variable that overrides the cache root.
const EnvRoot = "SBX_CACHE_DIR"

// Cache is a content-addressed store rooted at one directory. Its methods
// are safe for concurrent use, and several processes may share a root.
type Cache struct {
	root string
}

// DefaultRoot returns the cache root to use when none is given:
// $SBX_CACHE_DIR if set, else the "sbx" directory under
// os.UserCacheDir.
func DefaultRoot() (string, error) {
	if d := os.Getenv(EnvRoot); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: set %s: %w", EnvRoot, err)
	}
	return filepath.Join(d, "sbx"), nil
}

// Open opens the cache rooted at root, creating its directories if
// needed. An empty root means DefaultRoot. The error says so when root
// cannot be created or written to.
func Open(root string) (*Cache, error) {
	if root == "" {
		r, err := DefaultRoot()
		if err != nil {
			return nil, err
		}
		root = r
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("cache %s: %w", root, err)
	}
	for _, d := range []string{blobDir, outputDir, tmpDir} {
		if err := os.MkdirAll(filepath.Join(abs, d), 0o755); err != nil {
			return nil, fmt.Errorf("cache %s is not usable: %w", abs, unwrapPath(err))
		}
	}
	return &Cache{root: abs}, nil
}

// Directory layout under the root.
var (
	blobDir   = filepath.Join("blobs", "sha256")
	outputDir = "outputs"
	tmpDir    = "tmp"
)

// Root returns the cache's root directory, absolute.
func (c *Cache) Root() string { return c.root }

// ParseDigest returns the lower-case hex of a sha256 digest written
// "sha256:<hex>" or as bare hex.
func ParseDigest(digest string) (string, error) {
	h := digest
	if algo, rest, ok := strings.Cut(digest, ":"); ok {
		if algo != "sha256" {
			return "", fmt.Errorf("digest %q: only sha256 is supported", digest)
		}
		h = rest
	}
	h = strings.ToLower(h)
	if len(h) != sha256.Size*2 {
		return "", fmt.Errorf("digest %q is not a sha256 digest (64 hex digits)", digest)
	}
	if _, err := hex.DecodeString(h); err != nil {
		return "", fmt.Errorf("digest %q is not a sha256 digest (64 hex digits)", digest)
	}
	return h, nil
}

// Path returns the path of the blob with the given digest ("sha256:<hex>"
// or bare hex) and whether it is present. A malformed digest is never
// present.
func (c *Cache) Path(digest string) (string, bool) {
	h, err := ParseDigest(digest)
	if err != nil {
		return "", false
	}
	p := filepath.Join(c.root, blobDir, h)
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return p, false
	}
	return p, true
}

// Has reports whether the blob with the given digest is present.
func (c *Cache) Has(digest string) bool {
	_, ok := c.Path(digest)
	return ok
}

// OpenBlob opens the blob with the given digest for reading.
func (c *Cache) OpenBlob(digest string) (*os.File, error) {
	h, err := ParseDigest(digest)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(c.root, blobDir, h))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("blob sha256:%s is not in the cache %s", h, c.root)
	}
	return f, err
}

// MismatchError reports content whose sha256 is not the one it was
// promised to have. Want and Got are "sha256:<hex>".
type MismatchError struct {
	Want, Got string
	Size      int64 // bytes received
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("sha256 mismatch: want %s, got %s (%d bytes)", e.Want, e.Got, e.Size)
}

// Put stores the content write produces under the digest want
// ("sha256:<hex>" or bare hex) and returns the blob's path. When the blob
// is already present write is not called. The content goes to a
// temporary file in the cache, hashed on the way; only if write returns
// nil, ctx is not done and the hash equals want is the file synced and
// renamed into place. Otherwise nothing stays behind and the error is
// write's own, ctx's, or a *MismatchError.
func (c *Cache) Put(ctx context.Context, want string, write func(w io.Writer) error) (string, error) {
	h, err := ParseDigest(want)
	if err != nil {
		return "", err
	}
	final := filepath.Join(c.root, blobDir, h)
	if fi, err := os.Stat(final); err == nil && fi.Mode().IsRegular() {
		return final, nil
	}
	_, err = c.writeAtomic(ctx, final, write, func(got string, n int64) error {
		if got != h {
			return &MismatchError{Want: "sha256:" + h, Got: "sha256:" + got, Size: n}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return final, nil
}

// PutFile copies the file at path into the cache, checked against want
// like Put.
func (c *Cache) PutFile(ctx context.Context, want, path string) (string, error) {
	return c.Put(ctx, want, func(w io.Writer) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
}

// Verify rehashes the blob with the given digest and returns a
// *MismatchError if its content no longer matches its name (the blob is
// then removed, so that the next Put fetches it again), or an error if it
// is absent or unreadable. It stops with ctx's error once ctx ends.
func (c *Cache) Verify(ctx context.Context, digest string) error {
	f, err := c.OpenBlob(digest)
	if err != nil {
		return err
	}
	defer f.Close()
	hx := sha256.New()
	n, err := io.Copy(hx, ctxio.Reader(ctx, f))
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	want, _ := ParseDigest(digest)
	if got := hex.EncodeToString(hx.Sum(nil)); got != want {
		f.Close()
		if rerr := os.Remove(f.Name()); rerr != nil {
			return fmt.Errorf("%s: %w (and it cannot be removed: %v)", f.Name(),
				&MismatchError{Want: "sha256:" + want, Got: "sha256:" + got, Size: n}, rerr)
		}
		return fmt.Errorf("%s: %w", f.Name(), &MismatchError{Want: "sha256:" + want, Got: "sha256:" + got, Size: n})
	}
	return nil
}

// OutputPath returns where the output name of the recipe with the given
// input hash ("sha256:<hex>") is, or would be, stored, and whether it is
// present.
func (c *Cache) OutputPath(inputHash, name string) (string, bool, error) {
	p, err := c.outputPath(inputHash, name)
	if err != nil {
		return "", false, err
	}
	fi, err := os.Stat(p)
	return p, err == nil && fi.Mode().IsRegular(), nil
}

// PutOutput stores what write produces as the output name of the recipe
// with the given input hash, replacing any earlier one, and returns its
// path and "sha256:<hex>" digest. As with Put, a failed write leaves
// nothing behind (and an earlier output untouched).
func (c *Cache) PutOutput(ctx context.Context, inputHash, name string, write func(w io.Writer) error) (path, digest string, err error) {
	p, err := c.outputPath(inputHash, name)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", "", fmt.Errorf("cache %s: %w", c.root, unwrapPath(err))
	}
	got, err := c.writeAtomic(ctx, p, write, nil)
	if err != nil {
		return "", "", err
	}
	return p, "sha256:" + got, nil
}

func (c *Cache) outputPath(inputHash, name string) (string, error) {
	h, err := ParseDigest(inputHash)
	if err != nil {
		return "", fmt.Errorf("input hash: %w", err)
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("output name %q is not a plain file name", name)
	}
	return filepath.Join(c.root, outputDir, h, name), nil
}

// writeAtomic writes write's content to a temporary file in the cache,
// hashing it, then calls check (if not nil) with its hex sha256 and size
// and, if that passes, syncs the file and renames it to final. It returns
// the hex sha256. On any error the temporary file is removed.
func (c *Cache) writeAtomic(ctx context.Context, final string, write func(io.Writer) error, check func(got string, n int64) error) (got string, err error) {
	tmp, err := os.CreateTemp(filepath.Join(c.root, tmpDir), filepath.Base(final)+".partial-*")
	if err != nil {
		return "", fmt.Errorf("cache %s is not writable: %w", c.root, unwrapPath(err))
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	hx := sha256.New()
	cw := &countWriter{w: io.MultiWriter(tmp, hx), ctx: ctx}
	if err := write(cw); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	got = hex.EncodeToString(hx.Sum(nil))
	if check != nil {
		if err := check(got, cw.n); err != nil {
			return "", err
		}
	}
	if err := tmp.Chmod(0o444); err != nil {
		return "", fmt.Errorf("cache %s: %w", c.root, err)
	}
	if err := tmp.Sync(); err != nil {
		return "", fmt.Errorf("cache %s: %w", c.root, err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("cache %s: %w", c.root, err)
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", fmt.Errorf("cache %s: %w", c.root, err)
	}
	syncDir(filepath.Dir(final))
	return got, nil
}

// countWriter counts bytes and stops writing once ctx is done, so that a
// cancelled download ends at its next write.
type countWriter struct {
	w   io.Writer
	ctx context.Context
	n   int64
}

func (cw *countWriter) Write(p []byte) (int, error) {
	if err := cw.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	return n, err
}

// syncDir makes a rename durable. Errors are ignored: some file systems
// cannot sync directories, and the rename has happened either way.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// unwrapPath keeps a *fs.PathError's operation and path but reads better
// after a message that already names the root.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s %s: %w", pe.Op, pe.Path, pe.Err)
	}
	return err
}

// RemoveStale deletes temporary files older than age, which only a
// process that died while writing leaves behind. In-flight writes of
// live processes are younger than any sensible age.
func (c *Cache) RemoveStale(now time.Time, age time.Duration) error {
	dir := filepath.Join(c.root, tmpDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("cache %s: %w", c.root, unwrapPath(err))
	}
	var errs []error
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || now.Sub(fi.ModTime()) < age {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
