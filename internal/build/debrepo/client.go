package debrepo

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/sbx-dev/sbx/internal/build/repoget"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/sbx-dev/sbx/internal/atomicfile"
	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/ulikunitz/xz"
)

// Client fetches and verifies repository indexes and packages.
type Client struct {
	// HTTP fetches http and https URIs; nil means http.DefaultClient.
	HTTP *http.Client
	// Cache keeps verified InRelease files and indexes; nil keeps nothing
	// (and nothing works offline).
	Cache *cache.Cache
	// Keyring is the keyring of sources without Signed-By; nil means
	// DefaultKeyring.
	Keyring openpgp.EntityList
	// Arch is the Debian architecture of the binary indexes ("amd64").
	Arch string
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
}

// Limits on what is read from a repository before its hash is known.
const (
	maxInRelease = 32 << 20
	maxIndex     = 1 << 30
)

func (c *Client) log() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

func (c *Client) keyring(src Source) (openpgp.EntityList, error) {
	if src.SignedBy != "" {
		ks, err := ReadKeyring(src.SignedBy)
		if err != nil {
			return nil, fmt.Errorf("keyring %s of %s: %w", src.SignedBy, src, err)
		}
		return ks, nil
	}
	if c.Keyring != nil {
		return c.Keyring, nil
	}
	ks, err := ReadKeyring(DefaultKeyring)
	if err != nil {
		return nil, fmt.Errorf("%s has no Signed-By and the default keyring %s cannot be read: %w", src, DefaultKeyring, err)
	}
	return ks, nil
}

// Index fetches, verifies and parses the binary indexes of every source
// for c.Arch and returns them as one Index.
func (c *Client) Index(ctx context.Context, srcs []Source) (*Index, error) {
	if len(srcs) == 0 {
		return nil, errors.New("no Debian repositories are configured: the host has no apt sources and the spec names none")
	}
	var all [][]*Package
	for _, s := range srcs {
		pkgs, err := c.Packages(ctx, s)
		if err != nil {
			return nil, err
		}
		all = append(all, pkgs)
	}
	return NewIndex(c.Arch, all...), nil
}

// Packages fetches one source's InRelease, verifies it, and fetches,
// checks and parses its Packages index for every component. When the
// InRelease cannot be fetched (no network), the last one verified for
// this source is used from the cache, verified again.
func (c *Client) Packages(ctx context.Context, src Source) ([]*Package, error) {
	if len(src.Architectures) > 0 && !containsStr(src.Architectures, c.Arch) {
		return nil, nil
	}
	ks, err := c.keyring(src)
	if err != nil {
		return nil, err
	}
	rel, err := c.release(ctx, src, ks)
	if err != nil {
		return nil, err
	}
	var out []*Package
	for _, comp := range src.Components {
		dir := fmt.Sprintf("%s/binary-%s", comp, c.Arch)
		name, sum, ok := "", FileSum{}, false
		for _, n := range []string{"Packages.xz", "Packages.gz", "Packages"} {
			if sum, ok = rel.Files[dir+"/"+n]; ok {
				name = dir + "/" + n
				break
			}
		}
		if !ok {
			return nil, fmt.Errorf("%s: InRelease lists no Packages index for %s", src, dir)
		}
		blob, err := c.indexBlob(ctx, src, rel, name, sum)
		if err != nil {
			return nil, err
		}
		pkgs, err := parseIndexFile(blob, name, src.String()+" "+dir)
		if err != nil {
			return nil, err
		}
		out = append(out, pkgs...)
	}
	return out, nil
}

func (c *Client) release(ctx context.Context, src Source, ks openpgp.EntityList) (*Release, error) {
	u := src.URI + "/dists/" + src.Suite + "/InRelease"
	data, ferr := c.get(ctx, u, maxInRelease)
	if ferr == nil {
		rel, err := VerifyInRelease(data, ks)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", u, err)
		}
		c.remember(ctx, src, data)
		return rel, nil
	}
	if ctx.Err() != nil || c.Cache == nil {
		return nil, ferr
	}
	data, err := c.recall(src)
	if err != nil {
		return nil, fmt.Errorf("%w (and no verified copy is cached)", ferr)
	}
	rel, err := VerifyInRelease(data, ks)
	if err != nil {
		return nil, fmt.Errorf("cached InRelease of %s: %w", src, err)
	}
	c.log().Info("using the cached InRelease", "source", src.String(), "error", ferr.Error())
	return rel, nil
}

// pointer is where the digest of a source's last verified InRelease is
// kept.
func (c *Client) pointer(src Source) string {
	h := sha256.Sum256([]byte(src.URI + "\x00" + src.Suite))
	return filepath.Join(c.Cache.Root(), "debrepo", hex.EncodeToString(h[:]))
}

func (c *Client) remember(ctx context.Context, src Source, data []byte) {
	if c.Cache == nil {
		return
	}
	sum := sha256.Sum256(data)
	d := hex.EncodeToString(sum[:])
	if _, err := c.Cache.Put(ctx, d, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		c.log().Debug("cannot cache InRelease", "error", err.Error())
		return
	}
	p := c.pointer(src)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
		_ = atomicfile.WriteBytes(p, []byte(d), 0o644)
	}
}

func (c *Client) recall(src Source) ([]byte, error) {
	d, err := os.ReadFile(c.pointer(src))
	if err != nil {
		return nil, err
	}
	f, err := c.Cache.OpenBlob(strings.TrimSpace(string(d)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxInRelease))
}

// indexBlob returns the cached path of the index file name of src,
// fetching it (by hash when the suite allows) when absent. The cache
// checks its sha256; the size is checked here.
func (c *Client) indexBlob(ctx context.Context, src Source, rel *Release, name string, sum FileSum) (string, error) {
	if sum.Size > maxIndex {
		return "", fmt.Errorf("%s: %s is %d bytes, more than sbx reads", src, name, sum.Size)
	}
	base := src.URI + "/dists/" + src.Suite + "/"
	urls := []string{base + name}
	if rel.AcquireByHash {
		urls = []string{base + path.Dir(name) + "/by-hash/SHA256/" + sum.SHA256, base + name}
	}
	if c.Cache != nil {
		if p, ok := c.Cache.Path(sum.SHA256); ok {
			return p, nil
		}
	}
	var lastErr error
	for _, u := range urls {
		data, err := c.get(ctx, u, sum.Size)
		if err != nil {
			lastErr = err
			continue
		}
		if err := checkSum(data, sum); err != nil {
			return "", fmt.Errorf("%s: %w", u, err)
		}
		if c.Cache == nil {
			return writeTemp(data)
		}
		return c.Cache.Put(ctx, sum.SHA256, func(w io.Writer) error { _, err := w.Write(data); return err })
	}
	return "", lastErr
}

func checkSum(data []byte, sum FileSum) error {
	if int64(len(data)) != sum.Size {
		return fmt.Errorf("size %d, but InRelease says %d", len(data), sum.Size)
	}
	got := sha256.Sum256(data)
	if hex.EncodeToString(got[:]) != sum.SHA256 {
		return fmt.Errorf("sha256 %x, but InRelease says %s", got, sum.SHA256)
	}
	return nil
}

func writeTemp(data []byte) (string, error) {
	f, err := os.CreateTemp("", "sbx-index-*")
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, err = f.Write(data)
	return f.Name(), err
}

func parseIndexFile(p, name, label string) ([]*Package, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The xz reader reads a byte at a time from what it is given.
	br := bufio.NewReaderSize(f, 1<<20)
	var r io.Reader = br
	switch {
	case strings.HasSuffix(name, ".xz"):
		xr, err := xz.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		r = xr
	case strings.HasSuffix(name, ".gz"):
		gr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		defer gr.Close()
		r = gr
	}
	return ParsePackages(io.LimitReader(r, 4*maxIndex), label)
}

// get reads the URL u (http, https or file), at most limit bytes; more
// is an error.
func (c *Client) get(ctx context.Context, u string, limit int64) ([]byte, error) {
	return repoget.Get(ctx, c.HTTP, u, limit)
}

// Pin is one package as a lock records it.
type Pin struct {
	Name, Version, Architecture string
	// Filename is the path relative to the repository's base URI.
	Filename string
	SHA256   string
	Size     int64
}

// PinOf is the pin of a package from an index.
func PinOf(p *Package) Pin {
	return Pin{Name: p.Name, Version: p.Version.String(), Architecture: p.Architecture, Filename: p.Filename, SHA256: p.SHA256, Size: p.Size}
}

// Download brings the pinned package into the cache and returns its path.
// It tries each source's base URI in order (a pool path is relative to
// it) until one has the file; content whose size or sha256 differs from
// the pin is an error naming the package, never tried elsewhere: a
// repository that serves other bytes than it signed is not trusted for
// the rest.
func (c *Client) Download(ctx context.Context, srcs []Source, pin Pin) (string, error) {
	if c.Cache == nil {
		return "", errors.New("downloading packages needs a cache")
	}
	if !isHex64(pin.SHA256) {
		return "", fmt.Errorf("package %s %s: the pin has no sha256", pin.Name, pin.Version)
	}
	if err := checkPoolPath(pin.Filename); err != nil {
		return "", fmt.Errorf("package %s %s: %w", pin.Name, pin.Version, err)
	}
	if p, ok := c.Cache.Path(pin.SHA256); ok {
		return p, nil
	}
	seen := map[string]bool{}
	var lastErr error = fmt.Errorf("package %s %s: no repository is configured", pin.Name, pin.Version)
	for _, s := range srcs {
		if seen[s.URI] {
			continue
		}
		seen[s.URI] = true
		u := s.URI + "/" + pin.Filename
		data, err := c.get(ctx, u, pin.Size)
		if err != nil {
			lastErr = fmt.Errorf("package %s %s: %w", pin.Name, pin.Version, err)
			continue
		}
		if err := checkSum(data, FileSum{Size: pin.Size, SHA256: pin.SHA256}); err != nil {
			return "", fmt.Errorf("package %s %s from %s does not match the lock: %w", pin.Name, pin.Version, u, err)
		}
		return c.Cache.Put(ctx, pin.SHA256, func(w io.Writer) error { _, err := w.Write(data); return err })
	}
	return "", lastErr
}

// checkPoolPath checks that a pinned file name stays inside the
// repository: relative, clean, no "..".
func checkPoolPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p || strings.Contains(p, "..") || strings.ContainsAny(p, "?#\\\x00") {
		return fmt.Errorf("file name %q is not a path inside a repository", p)
	}
	return nil
}

func containsStr(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
