package resolve

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/sbx-dev/sbx/lang"
)

// NPMTarball finds the tarball of an exact version of the npm package
// pkg the way Resolve does: in the registry the user's npm configuration
// names for the package, through its package document. It returns the
// tarball's URL and the request header npm would send for it, which holds
// the user's registry credentials, if any: never print the header.
// Building an image uses it to fetch a pinned package again.
func (s *Set) NPMTarball(ctx context.Context, pkg, version string) (string, http.Header, error) {
	r, ok := s.resolvers[lang.SourceNPM].(*npmResolver)
	if !ok {
		return "", nil, fmt.Errorf("npm:%s@%s: no npm resolver", pkg, version)
	}
	if err := checkNPMName(pkg); err != nil {
		return "", nil, err
	}
	cfg, err := loadNPMConfig(r.dir, r.environ)
	if err != nil {
		return "", nil, err
	}
	reg, origin, err := r.registry(ctx, cfg, pkg)
	if err != nil {
		return "", nil, err
	}
	docURL, err := url.Parse(reg + strings.Replace(pkg, "/", "%2f", 1))
	if err != nil {
		return "", nil, fmt.Errorf("npm registry %s (from %s): %w", redactURL(reg), origin, stripURLError(err))
	}
	doc, err := r.packument(ctx, cfg, docURL)
	if err != nil {
		return "", nil, fmt.Errorf("%w (registry from %s)", err, origin)
	}
	m, ok := doc.Versions[version]
	if !ok {
		return "", nil, fmt.Errorf("registry %s: version %s of %s does not exist", redactURL(reg), version, pkg)
	}
	if m.Dist.Tarball == "" {
		return "", nil, fmt.Errorf("version %s: the registry gives no tarball", version)
	}
	tarURL, err := docURL.Parse(m.Dist.Tarball)
	if err != nil {
		return "", nil, fmt.Errorf("version %s: tarball URL: %w", version, stripURLError(err))
	}
	header := http.Header{}
	header.Set("User-Agent", userAgent)
	auth, err := cfg.authHeader(tarURL)
	if err != nil {
		return "", nil, err
	}
	if auth != "" {
		header.Set("Authorization", auth)
	}
	return tarURL.String(), header, nil
}
