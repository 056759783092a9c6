package resolve

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/apt"
	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/digest"
	"github.com/sbx-dev/sbx/internal/build/kernel"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
	"pault.ag/go/debian/version"
)

// debResolver pins Debian packages by version and .deb sha256.
type debResolver struct {
	apt apt.Downloader
}

var (
	_ Resolver       = (*debResolver)(nil)
	_ kernelResolver = (*debResolver)(nil)
)

// Resolve pins the package src names at the version pickVersion
// chooses.
func (r *debResolver) Resolve(ctx context.Context, src *lang.Source, platform lang.Platform) (*lockfiles.Pin, error) {
	return r.resolve(ctx, src, platform, false)
}

// ResolveKernel pins src as Resolve does, then follows a kernel meta
// package (linux-image-amd64, which holds no kernel and depends on the
// versioned package that does) to that package, at the version the meta
// package requires or else apt's candidate, and pins it instead.
func (r *debResolver) ResolveKernel(ctx context.Context, src *lang.Source, platform lang.Platform) (*lockfiles.Pin, error) {
	return r.resolve(ctx, src, platform, true)
}

// maxMetaHops bounds how many meta packages a kernel source is followed
// through; Debian's kernel meta packages depend on the image directly.
const maxMetaHops = 2

func (r *debResolver) resolve(ctx context.Context, src *lang.Source, platform lang.Platform, followMeta bool) (*lockfiles.Pin, error) {
	if src.Ref == "" {
		return nil, fmt.Errorf("a Debian package source is deb:NAME, deb:NAME=VERSION or deb:NAME>=VERSION")
	}
	arch, err := debArch(platform)
	if err != nil {
		return nil, err
	}
	qualify := func(pkg string) string {
		if host, _ := debArch(lang.Platform{OS: "linux", Architecture: runtime.GOARCH, Variant: goarmVariant()}); arch != host {
			return pkg + ":" + arch
		}
		return pkg
	}
	dir, err := os.MkdirTemp("", "sbx-deb-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// apt drops privileges to _apt for downloads when run as root; let it
	// write here.
	_ = os.Chmod(dir, 0o755)

	pkg, rels := src.Ref, src.DebRelations()
	for hop := 0; ; hop++ {
		ver, err := r.pickVersion(ctx, qualify(pkg), rels)
		if err != nil {
			return nil, err
		}
		// Each download gets its own directory: apt-get download is
		// expected to write exactly one .deb.
		sub := filepath.Join(dir, fmt.Sprint(hop))
		if err := os.Mkdir(sub, 0o755); err != nil {
			return nil, err
		}
		path, err := r.apt.Download(ctx, qualify(pkg), ver, sub)
		if err != nil {
			return nil, err
		}
		file := filepath.Base(path)
		if err := checkDebFilename(file, pkg, ver, arch); err != nil {
			return nil, err
		}
		if followMeta {
			target, targetVer, ok, err := kernelMeta(path)
			if err != nil {
				return nil, err
			}
			if ok {
				if hop+1 >= maxMetaHops {
					return nil, fmt.Errorf("following the kernel meta package %s led to %s %s, which depends on the kernel package %s in turn; name the package that holds the kernel", src.Ref, pkg, ver, target)
				}
				pkg, rels = target, nil
				if targetVer != "" {
					rels = []lang.DebRelation{{Op: "=", Version: targetVer}}
				}
				continue
			}
		}
		sum, _, err := digest.File(ctx, path)
		if err != nil {
			return nil, err
		}
		return &lockfiles.Pin{Version: ver, SHA256: sum, Filename: file}, nil
	}
}

// kernelMeta reads the control file of the .deb at path and reports the
// versioned kernel package it depends on when it is a kernel meta
// package (see kernel.FollowMeta).
func kernelMeta(path string) (target, version string, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", false, err
	}
	defer f.Close()
	fields, err := archive.Control(f)
	if err != nil {
		return "", "", false, fmt.Errorf("%s: %v", filepath.Base(path), err)
	}
	target, version, ok = kernel.FollowMeta(fields)
	return target, version, ok, nil
}

// pickVersion chooses the version of package name that a source with the
// relations rels pins: the exact version when the one relation is "="
// (apt is not asked; the download fails if no source offers it), else
// apt's candidate when it satisfies every relation, else the newest
// version apt offers that does.
func (r *debResolver) pickVersion(ctx context.Context, name string, rels []lang.DebRelation) (string, error) {
	if len(rels) == 1 && rels[0].Op == "=" {
		return rels[0].Version, nil
	}
	av, ok := r.apt.(apt.Lister)
	if !ok {
		return "", fmt.Errorf("%s: the apt downloader in use cannot list versions; name an exact version (deb:NAME=VERSION)", name)
	}
	candidate, available, err := av.Versions(ctx, name)
	if err != nil {
		return "", err
	}
	if candidate == "" && len(available) == 0 {
		return "", fmt.Errorf("apt has no version of %s: check the name, or run apt-get update (apt-cache policy %s shows what apt sees)", name, name)
	}
	if candidate != "" && debSatisfies(candidate, rels) {
		return candidate, nil
	}
	for _, v := range newestFirst(available) {
		if debSatisfies(v, rels) {
			return v, nil
		}
	}
	shown := candidate
	if shown == "" {
		shown = "(none)"
	}
	return "", fmt.Errorf("apt offers %s %s, none of them %s (apt's candidate is %s; apt-cache policy %s shows where each comes from)",
		name, strings.Join(available, ", "), relationsString(rels), shown, name)
}

// newestFirst sorts Debian versions newest first; versions that do not
// parse go last, in their order.
func newestFirst(vs []string) []string {
	type pv struct {
		raw string
		v   version.Version
		ok  bool
	}
	list := make([]pv, 0, len(vs))
	for _, s := range vs {
		v, err := version.Parse(s)
		list = append(list, pv{s, v, err == nil})
	}
	// Insertion sort keeps the order of equal and unparsable versions.
	for i := 1; i < len(list); i++ {
		for j := i; j > 0 && list[j].ok && (!list[j-1].ok || version.Compare(list[j].v, list[j-1].v) > 0); j-- {
			list[j], list[j-1] = list[j-1], list[j]
		}
	}
	out := make([]string, len(list))
	for i, p := range list {
		out[i] = p.raw
	}
	return out
}

// debSatisfies reports whether the Debian version v satisfies every
// relation in rels, by Debian's version ordering (dpkg
// --compare-versions). A version that does not parse satisfies none.
func debSatisfies(v string, rels []lang.DebRelation) bool {
	have, err := version.Parse(v)
	if err != nil {
		return false
	}
	for _, r := range rels {
		want, err := version.Parse(r.Version)
		if err != nil {
			return false
		}
		c := version.Compare(have, want)
		var ok bool
		switch r.Op {
		case "=":
			ok = c == 0
		case ">=":
			ok = c >= 0
		case "<=":
			ok = c <= 0
		case ">>":
			ok = c > 0
		case "<<":
			ok = c < 0
		}
		if !ok {
			return false
		}
	}
	return true
}

func relationsString(rels []lang.DebRelation) string {
	parts := make([]string, len(rels))
	for i, r := range rels {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

// splitDebFilename reads apt's name for a downloaded package,
// NAME_VERSION_ARCH.deb, with the version's ':' written %3a.
func splitDebFilename(file string) (name, version, arch string, ok bool) {
	base, ok := strings.CutSuffix(file, ".deb")
	parts := strings.Split(base, "_")
	if !ok || len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", false
	}
	v, err := url.PathUnescape(parts[1])
	if err != nil {
		v = parts[1]
	}
	return parts[0], v, parts[2], true
}

// checkDebFilename checks the downloaded file is the package asked for.
func checkDebFilename(file, name, version, arch string) error {
	n, v, a, ok := splitDebFilename(file)
	if !ok {
		return fmt.Errorf("downloaded %s, not a NAME_VERSION_ARCH.deb file", file)
	}
	if n != name || v != version || (a != arch && a != "all") {
		return fmt.Errorf("downloaded %s, want %s %s for %s", file, name, version, arch)
	}
	return nil
}

// debArch maps an OCI platform to its Debian architecture name.
func debArch(p lang.Platform) (string, error) {
	if p.OS != "linux" {
		return "", fmt.Errorf("platform %s: Debian packages are for linux only", p)
	}
	switch p.Architecture {
	case "amd64", "arm64", "s390x", "riscv64", "loong64":
		return p.Architecture, nil
	case "386":
		return "i386", nil
	case "ppc64le":
		return "ppc64el", nil
	case "mips64le":
		return "mips64el", nil
	case "arm":
		switch p.Variant {
		case "", "v7", "v8":
			return "armhf", nil
		case "v5", "v6":
			return "armel", nil
		}
	}
	return "", fmt.Errorf("no Debian architecture for platform %s", p)
}

// goarmVariant is this program's ARM variant, for finding the host's
// Debian architecture.
func goarmVariant() string {
	if runtime.GOARCH != "arm" {
		return ""
	}
	return "v7"
}
