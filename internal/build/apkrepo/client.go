package apkrepo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/sbx-dev/sbx/internal/build/repoget"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/cache"
)

// Repository is one line of /etc/apk/repositories: a base URL whose
// ARCH/APKINDEX.tar.gz lists the packages under ARCH/, and an optional
// tag ("@edge URL").
type Repository struct {
	URL string
	Tag string
}

func (r Repository) String() string {
	if r.Tag != "" {
		return "@" + r.Tag + " " + r.URL
	}
	return r.URL
}

// ParseRepositories reads /etc/apk/repositories: one repository URL a
// line, optionally preceded by "@tag"; blank lines and lines starting
// with "#" are skipped. Schemes other than http, https and file are
// errors naming the line (apk's local directory form, a bare path, is
// taken as file).
func ParseRepositories(data []byte) ([]Repository, error) {
	var out []Repository
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var r Repository
		f := strings.Fields(line)
		if strings.HasPrefix(f[0], "@") {
			if len(f) != 2 || len(f[0]) < 2 {
				return nil, fmt.Errorf("line %d: %q: a tagged repository is \"@tag URL\"", i+1, line)
			}
			r.Tag, f = f[0][1:], f[1:]
		}
		if len(f) != 1 {
			return nil, fmt.Errorf("line %d: %q: one URL per line", i+1, line)
		}
		u := strings.TrimRight(f[0], "/")
		if strings.HasPrefix(u, "/") {
			u = "file://" + u
		}
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https" && pu.Scheme != "file") || pu.RawQuery != "" || pu.Fragment != "" {
			return nil, fmt.Errorf("line %d: %q is not an http, https or file URL", i+1, f[0])
		}
		r.URL = u
		out = append(out, r)
	}
	return out, nil
}

// Client fetches and verifies indexes and packages.
type Client struct {
	// HTTP fetches http and https URLs; nil means http.DefaultClient.
	HTTP *http.Client
	// Cache keeps verified packages by sha256; Download needs it.
	Cache *cache.Cache
	// Keys are the trusted signing keys (the base image's /etc/apk/keys
	// or the spec's). An index or package not signed by one is refused.
	Keys Keys
	// Arch is the apk architecture ("x86_64", "aarch64").
	Arch string
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
}

// Limits on what is read from a repository before it is verified.
const (
	maxIndexFile   = 256 << 20
	maxPackageFile = 2 << 30
)

func (c *Client) log() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// Index fetches, verifies and parses every repository's index for
// c.Arch and returns them as one Index, repositories in order.
func (c *Client) Index(ctx context.Context, repos []Repository) (*Index, error) {
	if len(repos) == 0 {
		return nil, errors.New("no Alpine repositories are configured: the base image has no /etc/apk/repositories and the spec names none")
	}
	if len(c.Keys) == 0 {
		return nil, errors.New("no Alpine signing keys are trusted: the base image has no /etc/apk/keys and the spec names none")
	}
	var all [][]*Package
	for _, r := range repos {
		pkgs, err := c.Packages(ctx, r)
		if err != nil {
			return nil, err
		}
		all = append(all, pkgs)
	}
	return NewIndex(c.Arch, all...), nil
}

// Packages fetches one repository's APKINDEX.tar.gz, verifies its
// signature and parses it.
func (c *Client) Packages(ctx context.Context, r Repository) ([]*Package, error) {
	u := r.URL + "/" + c.Arch + "/APKINDEX.tar.gz"
	data, err := c.get(ctx, u, maxIndexFile)
	if err != nil {
		return nil, err
	}
	v, err := verifyIndex(data, c.Keys)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	pkgs, err := ParseIndex(bytes.NewReader(v.apkindex))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	for _, p := range pkgs {
		p.Repository = r.URL
	}
	c.log().Info("read Alpine index", "url", u, "packages", len(pkgs), "key", v.key, "description", v.description)
	return pkgs, nil
}

// Pin is one package as a lock records it.
type Pin struct {
	Name, Version, Arch string
	// Identity is the control segment's "Q1…" identity (the index's C:).
	Identity string
	// Filename is the path relative to a repository URL ("x86_64/git-2.43.0-r0.apk").
	Filename string
	// SHA256 and Size are the whole .apk's.
	SHA256 string
	Size   int64
}

// Fetched is a pinned package and the path of its verified .apk.
type Fetched struct {
	Pin  Pin
	Path string
}

// Fetch downloads an index package from its repository, verifies it
// (size against S:, signature, identity against C:, data hash) and
// returns its pin, with the whole file's sha256, and its path in the
// cache. This is what locking a package does.
func (c *Client) Fetch(ctx context.Context, p *Package) (Fetched, error) {
	if c.Cache == nil {
		return Fetched{}, errors.New("fetching packages needs a cache")
	}
	what := "package " + p.ID()
	if p.Repository == "" {
		return Fetched{}, fmt.Errorf("%s: not from a repository", what)
	}
	limit := int64(maxPackageFile)
	if p.Size > 0 {
		limit = p.Size
	}
	u := p.Repository + "/" + p.Filename()
	data, err := c.get(ctx, u, limit)
	if err != nil {
		return Fetched{}, fmt.Errorf("%s: %w", what, err)
	}
	if p.Size > 0 && int64(len(data)) != p.Size {
		return Fetched{}, fmt.Errorf("%s from %s: %d bytes, but the index says %d", what, u, len(data), p.Size)
	}
	if _, err := VerifyPackage(data, c.Keys, p.Checksum, what); err != nil {
		return Fetched{}, err
	}
	sum := sha256.Sum256(data)
	pin := Pin{Name: p.Name, Version: p.Version, Arch: p.Arch, Identity: p.Checksum, Filename: p.Filename(), SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data))}
	path, err := c.Cache.Put(ctx, pin.SHA256, func(w io.Writer) error { _, err := w.Write(data); return err })
	if err != nil {
		return Fetched{}, err
	}
	return Fetched{Pin: pin, Path: path}, nil
}

// Download brings a pinned package into the cache and returns its path.
// It tries each repository in order until one has the file; content
// whose size or sha256 differs from the pin, or that does not verify
// (signature, identity, data hash), is an error naming the package and
// is not tried elsewhere: a repository that serves other bytes than the
// lock names is not trusted for the rest.
func (c *Client) Download(ctx context.Context, repos []Repository, pin Pin) (string, error) {
	if c.Cache == nil {
		return "", errors.New("downloading packages needs a cache")
	}
	what := fmt.Sprintf("package %s-%s", pin.Name, pin.Version)
	if len(pin.SHA256) != 64 {
		return "", fmt.Errorf("%s: the pin has no sha256", what)
	}
	if err := checkFilename(pin.Filename); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if p, ok := c.Cache.Path(pin.SHA256); ok {
		return p, nil
	}
	var lastErr error = fmt.Errorf("%s: no repository is configured", what)
	seen := map[string]bool{}
	for _, r := range repos {
		if seen[r.URL] {
			continue
		}
		seen[r.URL] = true
		u := r.URL + "/" + pin.Filename
		data, err := c.get(ctx, u, pin.Size)
		var tl *repoget.TooLargeError
		if errors.As(err, &tl) {
			return "", fmt.Errorf("%s from %s does not match the lock: more than the %d bytes it pins", what, u, pin.Size)
		}
		if err != nil {
			lastErr = fmt.Errorf("%s: %w", what, err)
			continue
		}
		sum := sha256.Sum256(data)
		if int64(len(data)) != pin.Size || hex.EncodeToString(sum[:]) != pin.SHA256 {
			return "", fmt.Errorf("%s from %s does not match the lock: %d bytes with sha256 %x, the lock says %d bytes with sha256 %s", what, u, len(data), sum, pin.Size, pin.SHA256)
		}
		if _, err := VerifyPackage(data, c.Keys, pin.Identity, what); err != nil {
			return "", err
		}
		return c.Cache.Put(ctx, pin.SHA256, func(w io.Writer) error { _, err := w.Write(data); return err })
	}
	return "", lastErr
}

// checkFilename checks that a pinned file name stays inside a
// repository: ARCH/NAME.apk, clean and relative.
func checkFilename(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p || strings.Contains(p, "..") || strings.ContainsAny(p, "?#\\\x00%") || !strings.HasSuffix(p, ".apk") {
		return fmt.Errorf("file name %q is not a package path inside a repository", p)
	}
	return nil
}

// get reads the URL u (http, https or file), at most limit bytes; more
// is an error.
func (c *Client) get(ctx context.Context, u string, limit int64) ([]byte, error) {
	return repoget.Get(ctx, c.HTTP, u, limit)
}
