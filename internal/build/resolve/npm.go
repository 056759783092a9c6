package resolve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/download"
	"github.com/sbx-dev/sbx/internal/build/npmreg"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// npmResolver pins npm package tarballs. The registry comes from the
// user's npm configuration at resolution time; the pin records only the
// version and hashes.
type npmResolver struct {
	reg    *npmreg.Registry
	client *http.Client
}

var _ Resolver = (*npmResolver)(nil)

func (r *npmResolver) Resolve(ctx context.Context, src *lang.Source, _ lang.Platform) (*lockfiles.Pin, error) {
	doc, err := r.reg.Lookup(ctx, src.Ref)
	if err != nil {
		return nil, err
	}
	version, err := pickNPMVersion(doc, src.Version)
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", doc.Registry, err)
	}
	m := doc.Versions[version]
	if m.Dist.Integrity == "" && m.Dist.Shasum == "" {
		return nil, fmt.Errorf("version %s: the registry gives no integrity or shasum, so the tarball cannot be verified", version)
	}
	tarURL, header, err := doc.Tarball(version)
	if err != nil {
		return nil, err
	}
	got, err := download.Get(ctx, r.client, tarURL, header,
		download.Want{Integrity: m.Dist.Integrity, SHA1: strings.ToLower(m.Dist.Shasum)}, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("tarball of version %s: %w", version, err)
	}
	return &lockfiles.Pin{Version: version, Integrity: got.Integrity, SHA256: got.SHA256}, nil
}

// pickNPMVersion chooses the version spec names, as npm does: an exact
// version must exist; a range takes the "latest" tag when it satisfies
// the range and the highest matching version otherwise; anything else is
// a dist-tag; an empty spec means "latest".
func pickNPMVersion(doc *npmreg.Package, spec string) (string, error) {
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
