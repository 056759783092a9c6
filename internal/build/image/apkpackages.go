package image

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/apkrepo"
	"github.com/sbx-dev/sbx/internal/build/resolve"
	"github.com/sbx-dev/sbx/internal/build/rootfs"
	"github.com/sbx-dev/sbx/internal/lockfiles"
)

// apkLocked reports whether the lock pins an Alpine package set.
func (b *build) apkLocked() bool {
	p := b.lock.Inputs[lockfiles.PackagesKey]
	return p != nil && p.Kind == lockfiles.KindApkPackages
}

// apkPackages returns what rootfs needs to install the image's pinned
// Alpine packages, or nil when the lock pins none.
func (b *build) apkPackages() (*rootfs.ApkPackages, error) {
	if !b.apkLocked() {
		return nil, nil
	}
	var pins []apkrepo.Pin
	for key, p := range b.lock.Inputs {
		name, ok := strings.CutPrefix(key, lockfiles.PackageKeyPrefix)
		if !ok {
			continue
		}
		if p.Kind != lockfiles.KindApkPackage {
			return nil, fmt.Errorf("image %q: package %s is locked as %q in an Alpine package set; run `sbx lock`", b.img.Name, name, p.Kind)
		}
		size, err := strconv.ParseInt(p.Size, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("image %q: package %s: size %q: %w", b.img.Name, name, p.Size, err)
		}
		pins = append(pins, apkrepo.Pin{Name: name, Version: p.Version, Arch: p.Architecture, Filename: p.Filename, SHA256: p.SHA256, Size: size})
	}
	sort.Slice(pins, func(i, j int) bool { return pins[i].Name < pins[j].Name })
	world, err := resolve.ApkWorld(b.img)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", b.img.Name, err)
	}
	return &rootfs.ApkPackages{World: world, Fetch: func(ctx context.Context, base *apkrepo.Base) ([]apkrepo.Fetched, apkrepo.Keys, error) {
		return b.fetchApk(ctx, base, pins)
	}}, nil
}

// fetchApk brings the pinned Alpine packages into the cache from the
// repositories the image (or its base's /etc/apk/repositories) names,
// each checked against its pinned size and sha256 and verified with the
// image's (or the base's) keys. Packages already in the cache are not
// fetched; in verify mode their cached bytes are hashed again.
func (b *build) fetchApk(ctx context.Context, base *apkrepo.Base, pins []apkrepo.Pin) ([]apkrepo.Fetched, apkrepo.Keys, error) {
	repos, keys, err := resolve.ApkSources(b.img, b.opts.Fetch.Dir, base)
	if err != nil {
		return nil, nil, err
	}
	arch, err := resolve.ApkArch(b.img.Platform, base)
	if err != nil {
		return nil, nil, err
	}
	cl := &apkrepo.Client{HTTP: b.opts.Fetch.HTTPClient, Logger: b.opts.Fetch.Logger}
	if b.opts.ApkRepo != nil {
		c := *b.opts.ApkRepo
		cl = &c
	}
	cl.Cache, cl.Keys, cl.Arch = b.cache, keys, arch
	out := make([]apkrepo.Fetched, 0, len(pins))
	for _, p := range pins {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		path, err := cl.Download(ctx, repos, p)
		if err != nil {
			return nil, nil, err
		}
		if b.opts.Verify {
			if err := b.cache.Verify(ctx, p.SHA256); err != nil {
				return nil, nil, fmt.Errorf("package %s %s: cached blob: %w", p.Name, p.Version, err)
			}
		}
		out = append(out, apkrepo.Fetched{Pin: p, Path: path})
	}
	return out, keys, nil
}
