package npmreg

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/sbx-dev/sbx/internal/build/download"
)

// Registry looks packages up in the registries the user's npm
// configuration names. It is safe for concurrent use.
type Registry struct {
	dir     string
	environ []string
	client  *http.Client

	mu         sync.Mutex
	defaultReg string // npm's own default, asked for at most once
}

// New returns a Registry that reads npm configuration for a project in
// dir from environ (and the .npmrc files it names), runs npm from
// environ's PATH when no registry is configured, and fetches with client.
func New(dir string, environ []string, client *http.Client) *Registry {
	return &Registry{dir: dir, environ: environ, client: client}
}

// Package is a package's document as its registry serves it.
type Package struct {
	Name     string             `json:"name"`
	DistTags map[string]string  `json:"dist-tags"`
	Versions map[string]Version `json:"versions"`

	// Registry is the registry's URL without credentials, for messages.
	Registry string `json:"-"`
	docURL   *url.URL
	cfg      *config
}

// Version is one published version of a package.
type Version struct {
	Version string `json:"version"`
	Dist    struct {
		Tarball   string `json:"tarball"`
		Integrity string `json:"integrity"`
		Shasum    string `json:"shasum"`
	} `json:"dist"`
}

// maxDocument bounds the package document read into memory.
const maxDocument = 256 << 20

// Lookup fetches the document of package pkg from the registry the npm
// configuration names for it. Errors say where the registry came from.
func (r *Registry) Lookup(ctx context.Context, pkg string) (*Package, error) {
	if err := CheckName(pkg); err != nil {
		return nil, err
	}
	cfg, err := loadConfig(r.dir, r.environ)
	if err != nil {
		return nil, err
	}
	reg, origin, err := r.registry(ctx, cfg, pkg)
	if err != nil {
		return nil, err
	}
	docURL, err := url.Parse(reg + strings.Replace(pkg, "/", "%2f", 1))
	if err != nil {
		return nil, fmt.Errorf("npm registry %s (from %s): %w", download.Redact(reg), origin, download.StripURLError(err))
	}
	p, err := r.document(ctx, cfg, docURL)
	if err != nil {
		return nil, fmt.Errorf("%w (registry from %s)", err, origin)
	}
	// Messages name the package asked for, whatever the document says.
	p.Name, p.Registry, p.docURL, p.cfg = pkg, download.Redact(reg), docURL, cfg
	return p, nil
}

// Tarball returns the URL of version's tarball and the request header
// npm would send for it, which holds the user's registry credentials, if
// any: never print the header.
func (p *Package) Tarball(version string) (string, http.Header, error) {
	m, ok := p.Versions[version]
	if !ok {
		return "", nil, fmt.Errorf("registry %s: version %s of %s does not exist", p.Registry, version, p.Name)
	}
	if m.Dist.Tarball == "" {
		return "", nil, fmt.Errorf("version %s: the registry gives no tarball", version)
	}
	tarURL, err := p.docURL.Parse(m.Dist.Tarball)
	if err != nil {
		return "", nil, fmt.Errorf("version %s: tarball URL: %w", version, download.StripURLError(err))
	}
	header := http.Header{}
	header.Set("User-Agent", download.UserAgent)
	auth, err := p.cfg.authHeader(tarURL)
	if err != nil {
		return "", nil, err
	}
	if auth != "" {
		header.Set("Authorization", auth)
	}
	return tarURL.String(), header, nil
}

// registry returns the registry URL for pkg and where it was configured.
func (r *Registry) registry(ctx context.Context, cfg *config, pkg string) (reg, origin string, err error) {
	if reg, key, ok := cfg.registryFor(pkg); ok {
		return reg, cfg.origin[key], nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.defaultReg == "" {
		reg, err := defaultRegistry(ctx, r.environ)
		if err != nil {
			return "", "", err
		}
		r.defaultReg = reg
	}
	return r.defaultReg, "`npm config get registry`", nil
}

// document fetches and decodes a package document.
func (r *Registry) document(ctx context.Context, cfg *config, u *url.URL) (*Package, error) {
	shown := download.Redact(u.String())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shown, download.StripURLError(err))
	}
	req.Header.Set("Accept", "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*")
	req.Header.Set("User-Agent", download.UserAgent)
	auth, err := cfg.authHeader(u)
	if err != nil {
		return nil, err
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", shown, download.StripURLError(err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("GET %s: package not found (%s)", shown, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET %s: server answered %s", shown, resp.Status)
	}
	var doc Package
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxDocument)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("GET %s: invalid package document: %w", shown, err)
	}
	return &doc, nil
}

// CheckName accepts the package names npm can publish: lowercase
// URL-safe characters, optionally under one @scope/.
func CheckName(pkg string) error {
	name := pkg
	if strings.HasPrefix(pkg, "@") {
		scope, rest, ok := strings.Cut(pkg[1:], "/")
		if !ok || scope == "" || rest == "" {
			return fmt.Errorf("invalid npm package name %q: a scoped name is @scope/name", pkg)
		}
		if err := checkPart(pkg, scope); err != nil {
			return err
		}
		name = rest
	}
	return checkPart(pkg, name)
}

func checkPart(pkg, part string) error {
	if part == "" || part[0] == '.' || part[0] == '_' {
		return fmt.Errorf("invalid npm package name %q", pkg)
	}
	for _, c := range part {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.ContainsRune("-._~", c):
		default:
			return fmt.Errorf("invalid npm package name %q: character %q", pkg, c)
		}
	}
	return nil
}
