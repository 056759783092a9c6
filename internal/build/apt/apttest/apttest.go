package apttest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/apt"
	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/kernel"
)

// ErrNoApt is returned (wrapped) when a package is not in the cache and
// apt-get is not installed to download it.
var ErrNoApt = errors.New("apt-get is not installed")

// KernelMeta is the Debian meta package that depends on the current
// generic amd64 kernel.
const KernelMeta = "linux-image-amd64"

// CacheDir returns the directory packages are cached in,
// os.UserCacheDir()/sbx-test/debs, creating it.
func CacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("user cache directory: %w", err)
	}
	dir := filepath.Join(base, "sbx-test", "debs")
	return dir, os.MkdirAll(dir, 0o755)
}

// Newest returns the most recently modified of paths (the greatest name
// among equals), or "" when none can be read.
func Newest(paths []string) string {
	type file struct {
		path string
		mod  int64
	}
	var fs []file
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			fs = append(fs, file{p, fi.ModTime().UnixNano()})
		}
	}
	if len(fs) == 0 {
		return ""
	}
	sort.Slice(fs, func(i, j int) bool {
		if fs[i].mod != fs[j].mod {
			return fs[i].mod > fs[j].mod
		}
		return fs[i].path > fs[j].path
	})
	return fs[0].path
}

// Cached returns the newest cached .deb of package name at version (any
// version when ""), or "".
func Cached(name, version string) (string, error) {
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	glob := name + "_*.deb"
	if version != "" {
		// apt-get names files with the epoch's colon as %3a.
		glob = name + "_" + strings.ReplaceAll(version, ":", "%3a") + "_*.deb"
	}
	debs, err := filepath.Glob(filepath.Join(dir, glob))
	if err != nil {
		return "", err
	}
	return Newest(debs), nil
}

// Download returns the path in the cache of package name at version
// (apt's candidate when ""), downloading it with apt-get when no copy is
// there yet. The download goes to a fresh directory and is renamed into
// the cache, so that concurrent tests never see a partial file.
func Download(ctx context.Context, name, version string) (string, error) {
	if p, err := Cached(name, version); p != "" || err != nil {
		return p, err
	}
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", fmt.Errorf("package %s is not in %s and %w to download it", name, dir, ErrNoApt)
	}
	tmp, err := os.MkdirTemp(dir, ".download-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	got, err := (&apt.Get{}).Download(ctx, name, version, tmp)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, filepath.Base(got))
	return dst, os.Rename(got, dst)
}

// DebianKernel returns the path of the Debian generic amd64 kernel
// package (linux-image-VERSION-amd64, about 70 MB). A copy already in the
// cache is reused, the newest when there are several; otherwise the meta
// package is downloaded, kernel.FollowMeta names the versioned package it
// depends on, and that is downloaded.
func DebianKernel(ctx context.Context) (string, error) {
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	debs, _ := filepath.Glob(filepath.Join(dir, "linux-image-[0-9]*-amd64_*.deb"))
	var keep []string
	for _, d := range debs {
		if !strings.Contains(filepath.Base(d), "-unsigned_") {
			keep = append(keep, d)
		}
	}
	if p := Newest(keep); p != "" {
		return p, nil
	}
	meta, err := Download(ctx, KernelMeta, "")
	if err != nil {
		return "", err
	}
	f, err := os.Open(meta)
	if err != nil {
		return "", err
	}
	fields, err := archive.Control(f)
	f.Close()
	if err != nil {
		return "", fmt.Errorf("%s: %w", meta, err)
	}
	pkg, version, ok := kernel.FollowMeta(fields)
	if !ok {
		return "", fmt.Errorf("%s depends on no versioned kernel package (Depends: %s)", meta, fields.Get("Depends"))
	}
	return Download(ctx, pkg, version)
}

// Cache is an apt.Downloader and apt.Lister that downloads through the
// cache (once per package and version) and asks the host's apt which
// versions there are.
type Cache struct{}

var (
	_ apt.Downloader = Cache{}
	_ apt.Lister     = Cache{}
)

// Versions asks apt-cache policy, as apt.Get does.
func (Cache) Versions(ctx context.Context, name string) (string, []string, error) {
	return (&apt.Get{}).Versions(ctx, name)
}

// Download links (or copies) the cached package into dir.
func (Cache) Download(ctx context.Context, name, version, dir string) (string, error) {
	src, err := Download(ctx, name, version)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.Link(src, dst); err != nil {
		b, err := os.ReadFile(src)
		if err != nil {
			return "", err
		}
		return dst, os.WriteFile(dst, b, 0o644)
	}
	return dst, nil
}
