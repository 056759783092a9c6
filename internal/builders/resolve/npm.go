package resolve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/lockfiles"
)

// npmResolver pins npm package tarballs. The registry comes from the
// user's npm configuration at resolution time; the pin records only the
// version and hashes.
type npmResolver struct {
	dir     string
	environ []string
	client  *http.Client

	mu         sync.Mutex
	defaultReg string // npm's own default, asked for at most once
}

var _ Resolver = (*npmResolver)(nil)

func newNPMResolver(dir string, environ []string, client *http.Client) *npmResolver {
	return &npmResolver{dir: dir, environ: environ, client: client}
}

// packument is the part of a registry's package document used here.
type packument struct {
	Name     string                 `json:"name"`
	DistTags map[string]string      `json:"dist-tags"`
	Versions map[string]npmManifest `json:"versions"`
}

type npmManifest struct {
	Version string `json:"version"`
	Dist    struct {
		Tarball   string `json:"tarball"`
		Integrity string `json:"integrity"`
		Shasum    string `json:"shasum"`
	} `json:"dist"`
}

// maxPackument bounds the package document read into memory.
const maxPackument = 256 << 20

func (r *npmResolver) Resolve(ctx context.Context, src *lang.Source, _ lang.Platform) (*lockfiles.Pin, error) {
	pkg := src.Ref
	if err := checkNPMName(pkg); err != nil {
		return nil, err
	}
	cfg, err := loadNPMConfig(r.dir, r.environ)
	if err != nil {
		return nil, err
	}
	reg, origin, err := r.registry(ctx, cfg, pkg)
	if err != nil {
		return nil, err
	}
	docURL, err := url.Parse(reg + strings.Replace(pkg, "/", "%2f", 1))
	if err != nil {
		return nil, fmt.Errorf("npm registry %s (from %s): %w", redactURL(reg), origin, stripURLError(err))
	}
	doc, err := r.packument(ctx, cfg, docURL)
	if err != nil {
		return nil, fmt.Errorf("%w (registry from %s)", err, origin)
	}
	version, err := pickNPMVersion(doc, src.Version)
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", redactURL(reg), err)
	}
	m := doc.Versions[version]
	if m.Dist.Tarball == "" {
		return nil, fmt.Errorf("version %s: the registry gives no tarball", version)
	}
	if m.Dist.Integrity == "" && m.Dist.Shasum == "" {
		return nil, fmt.Errorf("version %s: the registry gives no integrity or shasum, so the tarball cannot be verified", version)
	}
	tarURL, err := docURL.Parse(m.Dist.Tarball)
	if err != nil {
		return nil, fmt.Errorf("version %s: tarball URL: %w", version, stripURLError(err))
	}
	header := http.Header{}
	auth, err := cfg.authHeader(tarURL)
	if err != nil {
		return nil, err
	}
	if auth != "" {
		header.Set("Authorization", auth)
	}
	got, err := fetchVerified(ctx, r.client, tarURL.String(), header,
		Want{Integrity: m.Dist.Integrity, SHA1: strings.ToLower(m.Dist.Shasum)}, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("tarball of version %s: %w", version, err)
	}
	return &lockfiles.Pin{Version: version, Integrity: got.Integrity, SHA256: got.SHA256}, nil
}

// registry returns the registry URL for pkg and where it was configured.
func (r *npmResolver) registry(ctx context.Context, cfg *npmConfig, pkg string) (reg, origin string, err error) {
	if reg, key, ok := cfg.registryFor(pkg); ok {
		return reg, cfg.origin[key], nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.defaultReg == "" {
		reg, err := npmDefaultRegistry(ctx, r.dir, r.environ)
		if err != nil {
			return "", "", err
		}
		r.defaultReg = reg
	}
	return r.defaultReg, "`npm config get registry`", nil
}

// packument fetches and decodes a package document.
func (r *npmResolver) packument(ctx context.Context, cfg *npmConfig, u *url.URL) (*packument, error) {
	shown := redactURL(u.String())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shown, stripURLError(err))
	}
	req.Header.Set("Accept", "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*")
	req.Header.Set("User-Agent", userAgent)
	auth, err := cfg.authHeader(u)
	if err != nil {
		return nil, err
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", shown, stripURLError(err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("GET %s: package not found (%s)", shown, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET %s: server answered %s", shown, resp.Status)
	}
	var doc packument
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxPackument)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("GET %s: invalid package document: %w", shown, err)
	}
	return &doc, nil
}

// pickNPMVersion chooses the version spec names, as npm does: an exact
// version must exist; a range takes the "latest" tag when it satisfies
// the range and the highest matching version otherwise; anything else is
// a dist-tag; an empty spec means "latest".
func pickNPMVersion(doc *packument, spec string) (string, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		spec = "latest"
	}
	type cand struct {
		key string
		v   semver
	}
	var all []cand
	for k := range doc.Versions {
		if v, ok := parseSemver(k); ok {
			all = append(all, cand{k, v})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v.compare(all[j].v) > 0 })

	if want, ok := parseSemver(spec); ok {
		for _, c := range all {
			if c.v.compare(want) == 0 {
				return c.key, nil
			}
		}
		return "", fmt.Errorf("version %s does not exist (newest: %s)", spec, newest(all, func(c cand) string { return c.key }))
	}
	if rng, ok := parseRange(spec); ok {
		if latest, ok := doc.DistTags["latest"]; ok {
			if v, ok := parseSemver(latest); ok && rng.satisfies(v) {
				if _, exists := doc.Versions[latest]; exists {
					return latest, nil
				}
			}
		}
		for _, c := range all {
			if rng.satisfies(c.v) {
				return c.key, nil
			}
		}
		return "", fmt.Errorf("no version matches %q (newest: %s)", spec, newest(all, func(c cand) string { return c.key }))
	}
	v, ok := doc.DistTags[spec]
	if !ok {
		var tags []string
		for t := range doc.DistTags {
			tags = append(tags, t)
		}
		sort.Strings(tags)
		return "", fmt.Errorf("%q is neither a version, a range nor a dist-tag (tags: %s)", spec, listOrNone(tags))
	}
	if _, exists := doc.Versions[v]; !exists {
		return "", fmt.Errorf("dist-tag %s points at %s, which the registry does not list", spec, v)
	}
	return v, nil
}

// newest lists up to five of the highest entries of a descending list.
func newest[T any](xs []T, str func(T) string) string {
	var out []string
	for i := 0; i < len(xs) && i < 5; i++ {
		out = append(out, str(xs[i]))
	}
	return listOrNone(out)
}

// checkNPMName accepts the package names npm can publish: lowercase
// URL-safe characters, optionally under one @scope/.
func checkNPMName(pkg string) error {
	name := pkg
	if strings.HasPrefix(pkg, "@") {
		scope, rest, ok := strings.Cut(pkg[1:], "/")
		if !ok || scope == "" || rest == "" {
			return fmt.Errorf("invalid npm package name %q: a scoped name is @scope/name", pkg)
		}
		if err := checkNPMPart(pkg, scope); err != nil {
			return err
		}
		name = rest
	}
	return checkNPMPart(pkg, name)
}

func checkNPMPart(pkg, part string) error {
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
