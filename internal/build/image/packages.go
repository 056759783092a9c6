package image

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/debrepo"
	"github.com/sbx-dev/sbx/internal/build/resolve"
	"github.com/sbx-dev/sbx/internal/lockfiles"
)

// fetchPackages brings the image's pinned packages into the cache from
// the repositories the image (or the host's apt configuration) names,
// each checked against its pinned size and sha256, and returns them
// sorted by name. Packages already in the cache are not fetched.
func (b *build) fetchPackages(ctx context.Context) ([]debrepo.Fetched, error) {
	if b.apkLocked() {
		// Alpine packages are fetched once the base is unpacked (apkPackages).
		return nil, nil
	}
	var pins []debrepo.Pin
	for key, p := range b.lock.Inputs {
		name, ok := strings.CutPrefix(key, lockfiles.PackageKeyPrefix)
		if !ok {
			continue
		}
		size, err := strconv.ParseInt(p.Size, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("image %q: package %s: size %q: %w", b.img.Name, name, p.Size, err)
		}
		pins = append(pins, debrepo.Pin{Name: name, Version: p.Version, Architecture: p.Architecture, Filename: p.Filename, SHA256: p.SHA256, Size: size})
	}
	if len(pins) == 0 {
		return nil, nil
	}
	sort.Slice(pins, func(i, j int) bool { return pins[i].Name < pins[j].Name })
	srcs, err := resolve.PackageSources(b.img, b.opts.Fetch.Dir, b.opts.AptRoot)
	if err != nil {
		return nil, err
	}
	cl := &debrepo.Client{HTTP: b.opts.Fetch.HTTPClient, Cache: b.cache, Arch: runtime.GOARCH, Logger: b.opts.Fetch.Logger}
	if b.opts.DebRepo != nil {
		c := *b.opts.DebRepo
		c.Cache = b.cache
		cl = &c
	}
	out := make([]debrepo.Fetched, 0, len(pins))
	for _, p := range pins {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		path, err := cl.Download(ctx, srcs, p)
		if err != nil {
			return nil, fmt.Errorf("image %q: %w", b.img.Name, err)
		}
		if b.opts.Verify {
			if err := b.cache.Verify(ctx, p.SHA256); err != nil {
				return nil, fmt.Errorf("image %q: package %s %s: cached blob: %w", b.img.Name, p.Name, p.Version, err)
			}
		}
		out = append(out, debrepo.Fetched{Pin: p, Path: path})
	}
	return out, nil
}
