package resolve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/debrepo"
	"github.com/sbx-dev/sbx/internal/hostenv"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// PackageSources returns where the packages of img come from: the
// image's repositories when it names some, else the apt sources of the
// configuration under aptRoot ("" means "/", the host's). A relative
// keyring or signed-by path is relative to dir, the configuration
// directory.
func PackageSources(img *lang.Image, dir, aptRoot string) ([]debrepo.Source, error) {
	if aptRoot == "" {
		aptRoot = "/"
	}
	var srcs []debrepo.Source
	if rs := img.Packages.Repositories; len(rs) > 0 {
		var err error
		srcs, err = debrepo.ParseSources([]byte(strings.Join(rs, "\n")+"\n"), false)
		if err != nil {
			return nil, fmt.Errorf("%s repositories: %w", img.Addr(), err)
		}
	} else {
		var err error
		srcs, err = debrepo.HostSources(aptRoot)
		if err != nil {
			return nil, fmt.Errorf("reading the host's apt sources: %w", err)
		}
		if len(srcs) == 0 {
			return nil, fmt.Errorf("%s has packages, but the host has no apt sources (%s) and the image names no repositories", img.Addr(), filepath.Join(aptRoot, "etc/apt"))
		}
	}
	for i := range srcs {
		if srcs[i].SignedBy == "" && img.Packages.Keyring != "" {
			srcs[i].SignedBy = img.Packages.Keyring
		}
		if srcs[i].SignedBy != "" && !filepath.IsAbs(srcs[i].SignedBy) {
			srcs[i].SignedBy = filepath.Join(dir, srcs[i].SignedBy)
		}
	}
	return srcs, nil
}

// packagesDigest identifies what a package closure was resolved for:
// the platform, the base image's pin, the requests (sorted: their order
// does not matter) and the sources with their keyrings.
func packagesDigest(img *lang.Image, srcs []debrepo.Source, base *lockfiles.Pin) string {
	h := sha256.New()
	fmt.Fprintf(h, "sbx-packages-v1\x00%s\x00", img.Platform)
	if base != nil {
		// What the base has installed decides what the closure needs.
		fmt.Fprintf(h, "base\x00%s\x00%s\x00", base.Digest, base.Manifest)
	}
	reqs := append([]string(nil), img.Packages.Requests...)
	sort.Strings(reqs)
	for _, r := range reqs {
		fmt.Fprintf(h, "req\x00%s\x00", r)
	}
	for _, s := range srcs {
		fmt.Fprintf(h, "src\x00%s\x00%s\x00%s\x00%s\x00%s\x00", s.URI, s.Suite, strings.Join(s.Components, " "), strings.Join(s.Architectures, " "), s.SignedBy)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// lockPackages returns the package pins of img: the "packages" pin and
// one "package.NAME" pin per package of the closure. An Alpine base's
// packages are locked by lockApkPackages; what follows is the Debian case.
//
// The previous lock's pins are kept unchanged, without any network
// access, while the request, platform, base image, sources and keyrings
// are the same (the "packages" pin's digest) and upgrade is false. A base
// image with a dpkg status file (/var/lib/dpkg/status) counts as
// installed: the packages it has are not pinned again. Without one, the
// Essential and required packages are added to the closure. Otherwise the
// closure is resolved again against the repositories (their cached,
// verified indexes when offline), preferring the previously pinned
// version of every package unless upgrade is set, so that adding one
// package moves no other.
func (s *Set) lockPackages(ctx context.Context, img *lang.Image, base *lockfiles.Pin, prev *lockfiles.Image, upgrade bool) (map[string]*lockfiles.Pin, error) {
	if alpine, pins, err := s.lockApkPackages(ctx, img, base, prev, upgrade); alpine {
		return pins, err
	}
	srcs, err := PackageSources(img, s.dir, s.aptRoot)
	if err != nil {
		return nil, err
	}
	digest := packagesDigest(img, srcs, base)
	source := strings.Join(img.Packages.Requests, ", ")
	if !upgrade && prev != nil {
		if old := prev.Inputs[lockfiles.PackagesKey]; old != nil && old.Digest == digest && prev.Platform == img.Platform.String() {
			out := map[string]*lockfiles.Pin{}
			complete := true
			for k, p := range prev.Inputs {
				if strings.HasPrefix(k, lockfiles.PackageKeyPrefix) {
					complete = complete && p.Version != "" && p.SHA256 != "" && p.Filename != "" && p.Size != ""
					out[k] = clonePin(p)
				}
			}
			if complete && len(out) > 0 {
				out[lockfiles.PackagesKey] = clonePin(old)
				out[lockfiles.PackagesKey].Source = source
				return out, nil
			}
		}
	}
	arch, err := debArch(img.Platform)
	if err != nil {
		return nil, err
	}
	cl, err := s.debClient(arch)
	if err != nil {
		return nil, err
	}
	ix, err := cl.Index(ctx, srcs)
	if err != nil {
		return nil, err
	}
	var reqs []debrepo.Request
	for _, r := range img.Packages.Requests {
		q, err := debrepo.ParseRequest(r)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, q)
	}
	opts := debrepo.ResolveOptions{Essential: true, Prefer: map[string]string{}}
	status, err := s.baseDpkgStatus(ctx, img, base)
	if err != nil {
		return nil, err
	}
	if status != nil {
		// The base is a Debian system: what it has installed counts,
		// and it has its essential packages already.
		if opts.Installed, err = debrepo.ParseStatus(bytes.NewReader(status)); err != nil {
			return nil, fmt.Errorf("the base image's dpkg status: %w", err)
		}
		opts.Essential = false
	}
	if prev != nil && !upgrade {
		for k, p := range prev.Inputs {
			if name, ok := strings.CutPrefix(k, lockfiles.PackageKeyPrefix); ok {
				opts.Prefer[name] = p.Version
			}
		}
	}
	pkgs, err := debrepo.Resolve(ix, reqs, opts)
	if err != nil {
		return nil, err
	}
	out := map[string]*lockfiles.Pin{
		lockfiles.PackagesKey: {Source: source, Kind: lockfiles.KindDebPackages, Digest: digest},
	}
	for _, p := range pkgs {
		if p.SHA256 == "" || p.Filename == "" {
			return nil, fmt.Errorf("%s: the index gives no sha256 or file name", p.ID())
		}
		out[lockfiles.PackageKeyPrefix+p.Name] = &lockfiles.Pin{
			Source:       p.Name,
			Kind:         lockfiles.KindDebPackage,
			Version:      p.Version.String(),
			Architecture: p.Architecture,
			Filename:     p.Filename,
			SHA256:       p.SHA256,
			Size:         strconv.FormatInt(p.Size, 10),
		}
	}
	s.log.Info("resolved packages", "image", img.Name, "requested", len(reqs), "packages", len(pkgs))
	return out, nil
}

// debClient returns the repository client for arch.
func (s *Set) debClient(arch string) (*debrepo.Client, error) {
	c := debrepo.Client{HTTP: s.http, Arch: arch, Logger: s.log}
	if s.debRepo != nil {
		c = *s.debRepo
		c.Arch = arch
	}
	if c.Cache == nil {
		ch, err := cache.Open(hostenv.Get(s.environ, cache.EnvRoot))
		if err != nil {
			return nil, err
		}
		c.Cache = ch
	}
	return &c, nil
}
