package resolve

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/apkrepo"
	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/hostenv"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// maxApkFile bounds each apk file read from a base image's layers.
const maxApkFile = 64 << 20

// alpineRelease is the file an Alpine base holds even before apk has
// recorded a package.
const alpineRelease = "etc/alpine-release"

// apkRepositories reports whether the image names Alpine repositories
// (URLs) rather than apt source lines.
func apkRepositories(img *lang.Image) bool {
	rs := img.Packages.Repositories
	return len(rs) > 0 && !strings.HasPrefix(strings.TrimSpace(rs[0]), "deb")
}

// ApkBase reads what the base image pinned as pin says about apk, from
// its layers (top layer first, whiteouts applied, every layer checked
// against its digest as lock reads a dpkg status): repositories, keys,
// architecture, installed packages and world. It returns nil when the
// base is not Alpine (it has neither /etc/alpine-release nor an apk
// installed database) or the image has no base.
func (s *Set) ApkBase(ctx context.Context, img *lang.Image, pin *lockfiles.Pin) (*apkrepo.Base, error) {
	if img.Base == nil || pin == nil {
		return nil, nil
	}
	layers, done, err := s.baseLayers(ctx, img.Base, pin)
	if err != nil {
		return nil, fmt.Errorf("reading the base image's apk files: %w", err)
	}
	defer done()
	files := map[string][]byte{}
	decided := map[string]bool{}
	var hidden []string
	for i := len(layers) - 1; i >= 0; i-- {
		wh, err := apkFilesInLayer(layers[i], files, decided, hidden)
		if err != nil {
			return nil, fmt.Errorf("reading the base image's apk files: %w", err)
		}
		hidden = append(hidden, wh...)
	}
	return parseApkBase(files)
}

// wantApkFile reports whether p (clean, relative) is one of the files
// ApkBase reads.
func wantApkFile(p string) bool {
	switch p {
	case alpineRelease, apkrepo.InstalledPath[1:], "usr" + apkrepo.InstalledPath, apkrepo.RepositoriesPath[1:], apkrepo.ArchPath[1:], apkrepo.WorldPath[1:]:
		return true
	}
	dir, base := path.Split(p)
	return dir == apkrepo.KeysDir[1:]+"/" && base != ""
}

// apkFilesInLayer reads one layer: every wanted regular file that no
// upper layer decided (held, or whited out) goes into files, and it
// returns the paths the layer whites out, which hide lower layers.
func apkFilesInLayer(open layerOpener, files map[string][]byte, decided map[string]bool, hidden []string) ([]string, error) {
	rc, err := open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	dr, _, err := archive.Decompress(rc)
	if err != nil {
		return nil, err
	}
	defer dr.Close()
	isHidden := func(p string) bool {
		for _, h := range hidden {
			if h == "" || p == h || strings.HasPrefix(p, h+"/") {
				return true
			}
		}
		return false
	}
	var whiteouts []string
	tr := tar.NewReader(dr)
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		p := archive.CleanName(hdr.Name)
		dir, base := path.Split(p)
		if strings.HasPrefix(base, ".wh.") {
			gone := path.Join(dir, strings.TrimPrefix(base, ".wh."))
			if base == ".wh..wh..opq" {
				gone = strings.TrimSuffix(dir, "/")
			}
			whiteouts = append(whiteouts, gone)
			continue
		}
		if !wantApkFile(p) || decided[p] || isHidden(p) {
			continue
		}
		decided[p] = true
		if hdr.Typeflag != tar.TypeReg && hdr.Typeflag != 0 {
			// A link or directory in the way: apk would not read it
			// as its file either.
			continue
		}
		b, err := io.ReadAll(io.LimitReader(tr, maxApkFile+1))
		if err != nil {
			return nil, err
		}
		if len(b) > maxApkFile {
			return nil, fmt.Errorf("/%s is larger than %d MiB", p, maxApkFile>>20)
		}
		files[p] = b
	}
	// Read to the end, so that the digest is checked.
	if _, err := io.Copy(io.Discard, dr); err != nil {
		return nil, err
	}
	return whiteouts, nil
}

// parseApkBase reads the files ApkBase found, or returns nil when they
// do not make an Alpine system.
func parseApkBase(files map[string][]byte) (*apkrepo.Base, error) {
	installed, ok := files[apkrepo.InstalledPath[1:]]
	if !ok {
		installed, ok = files["usr"+apkrepo.InstalledPath]
	}
	if _, rel := files[alpineRelease]; !ok && !rel {
		return nil, nil
	}
	b := &apkrepo.Base{Keys: apkrepo.Keys{}}
	var err error
	if ok {
		if b.Installed, err = apkrepo.ParseInstalled(bytes.NewReader(installed)); err != nil {
			return nil, fmt.Errorf("the base image's %s: %w", apkrepo.InstalledPath, err)
		}
	}
	if data, ok := files[apkrepo.RepositoriesPath[1:]]; ok {
		if b.Repositories, err = apkrepo.ParseRepositories(data); err != nil {
			return nil, fmt.Errorf("the base image's %s: %w", apkrepo.RepositoriesPath, err)
		}
	}
	b.Arch = strings.TrimSpace(string(files[apkrepo.ArchPath[1:]]))
	b.World = strings.Fields(string(files[apkrepo.WorldPath[1:]]))
	for p, data := range files {
		name, ok := strings.CutPrefix(p, apkrepo.KeysDir[1:]+"/")
		if !ok {
			continue
		}
		k, err := apkrepo.ParseKey(data)
		if err != nil {
			return nil, fmt.Errorf("the base image's key /%s: %w", p, err)
		}
		b.Keys[name] = k
	}
	return b, nil
}

// ApkSources returns the repositories and trusted keys an Alpine image's
// packages come from: the image's repositories when it names some, else
// the base's /etc/apk/repositories (http and https only: a base naming a
// local path is an error); the image's keyring (a key file, or
// a directory of them, relative to dir, the configuration directory)
// when it names one, else the base's /etc/apk/keys.
func ApkSources(img *lang.Image, dir string, base *apkrepo.Base) ([]apkrepo.Repository, apkrepo.Keys, error) {
	repos := base.Repositories
	if len(img.Packages.Repositories) == 0 {
		for _, r := range repos {
			// The base image is someone else's file system: it may name
			// servers, but not files on this host.
			if !strings.HasPrefix(r.URL, "http://") && !strings.HasPrefix(r.URL, "https://") {
				return nil, nil, fmt.Errorf("%s: the base image's %s names %s; only http and https repositories are taken from a base (the spec's repositories may name a file: one)", img.Addr(), apkrepo.RepositoriesPath, r.URL)
			}
		}
	}
	if rs := img.Packages.Repositories; len(rs) > 0 {
		if !apkRepositories(img) {
			return nil, nil, fmt.Errorf("%s has an Alpine base, but its repositories are apt source lines", img.Addr())
		}
		var err error
		if repos, err = apkrepo.ParseRepositories([]byte(strings.Join(rs, "\n") + "\n")); err != nil {
			return nil, nil, fmt.Errorf("%s repositories: %w", img.Addr(), err)
		}
	}
	if len(repos) == 0 {
		return nil, nil, fmt.Errorf("%s has packages, but its Alpine base has no %s and the image names no repositories", img.Addr(), apkrepo.RepositoriesPath)
	}
	keys := base.Keys
	if k := img.Packages.Keyring; k != "" {
		if !filepath.IsAbs(k) {
			k = filepath.Join(dir, k)
		}
		fi, err := os.Stat(k)
		if err != nil {
			return nil, nil, fmt.Errorf("%s keyring: %w", img.Addr(), err)
		}
		if fi.IsDir() {
			if keys, err = apkrepo.ReadKeys(k); err != nil {
				return nil, nil, fmt.Errorf("%s keyring: %w", img.Addr(), err)
			}
		} else {
			data, err := os.ReadFile(k)
			if err != nil {
				return nil, nil, fmt.Errorf("%s keyring: %w", img.Addr(), err)
			}
			pub, err := apkrepo.ParseKey(data)
			if err != nil {
				return nil, nil, fmt.Errorf("%s keyring %s: %w", img.Addr(), k, err)
			}
			// apk names a signature by its key's file name.
			keys = apkrepo.Keys{filepath.Base(k): pub}
		}
	}
	if len(keys) == 0 {
		return nil, nil, fmt.Errorf("%s has packages, but its Alpine base has no keys in %s and the image names no keyring", img.Addr(), apkrepo.KeysDir)
	}
	return repos, keys, nil
}

// ApkArch returns the apk architecture of an image's platform, checked
// against the base's /etc/apk/arch when it has one.
func ApkArch(p lang.Platform, base *apkrepo.Base) (string, error) {
	var arch string
	switch p.Architecture {
	case "amd64":
		arch = "x86_64"
	case "arm64":
		arch = "aarch64"
	default:
		return "", fmt.Errorf("no Alpine architecture is known for platform %s", p)
	}
	if base != nil && base.Arch != "" && base.Arch != arch {
		return "", fmt.Errorf("the base image's %s says %s, but the platform %s is %s", apkrepo.ArchPath, base.Arch, p, arch)
	}
	return arch, nil
}

// ApkWorld returns an image's package requests as apk world constraints:
// "NAME", "NAME=VERSION" and "NAME (OP VERSION)" with Debian's
// operators, << and >> being apk's < and >. Written without spaces
// ("curl>=8") a request is already one.
func ApkWorld(img *lang.Image) ([]apkrepo.Dep, error) {
	var out []apkrepo.Dep
	for _, r := range img.Packages.Requests {
		t := strings.TrimSpace(r)
		i := strings.IndexAny(t, "<>=( ")
		s := t
		if i >= 0 {
			rest := strings.TrimSpace(t[i:])
			rest = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(rest, "("), ")"))
			for _, op := range [][2]string{{"<<", "<"}, {">>", ">"}, {"<=", "<="}, {">=", ">="}, {"=", "="}} {
				if v, ok := strings.CutPrefix(rest, op[0]); ok {
					rest = op[1] + strings.TrimSpace(v)
					break
				}
			}
			s = t[:i] + rest
		}
		d, err := apkrepo.ParseDep(s)
		if err != nil {
			return nil, fmt.Errorf("package %q: %w", r, err)
		}
		if d.Conflict || d.Op == "><" {
			return nil, fmt.Errorf("package %q: a request names a package and a version", r)
		}
		out = append(out, d)
	}
	return out, nil
}

// apkPackagesDigest identifies what an Alpine closure was resolved for:
// the platform, the base image's pin (which fixes its repositories,
// keys and installed packages), the requests (sorted) and the image's
// own repositories and keyring.
func apkPackagesDigest(img *lang.Image, base *lockfiles.Pin) string {
	h := sha256.New()
	fmt.Fprintf(h, "sbx-apk-packages-v1\x00%s\x00", img.Platform)
	if base != nil {
		fmt.Fprintf(h, "base\x00%s\x00%s\x00", base.Digest, base.Manifest)
	}
	reqs := append([]string(nil), img.Packages.Requests...)
	sort.Strings(reqs)
	for _, r := range reqs {
		fmt.Fprintf(h, "req\x00%s\x00", r)
	}
	for _, r := range img.Packages.Repositories {
		fmt.Fprintf(h, "repo\x00%s\x00", strings.TrimSpace(r))
	}
	fmt.Fprintf(h, "keyring\x00%s\x00", img.Packages.Keyring)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// lockApkPackages returns the package pins of img when its base is
// Alpine, and whether it is. A base stays Debian without its layers
// being read again while it is the base the previous lock resolved a
// Debian package set for, and the image names no Alpine repositories.
// The previous pins are kept unchanged, without network access, while
// the "packages" digest is the same. Otherwise the closure is resolved
// with apkrepo.Resolve over the repositories' verified indexes, the
// base's installed packages counting as installed and previous versions
// preferred unless upgrade is set, and every package of it is fetched
// and verified, so that the lock pins the sha256 and size of each whole
// .apk (the index gives neither).
func (s *Set) lockApkPackages(ctx context.Context, img *lang.Image, basePin *lockfiles.Pin, prev *lockfiles.Image, upgrade bool) (bool, map[string]*lockfiles.Pin, error) {
	if img.Base == nil || basePin == nil {
		if apkRepositories(img) {
			return true, nil, fmt.Errorf("%s names Alpine repositories, but has no base image to install into", img.Addr())
		}
		return false, nil, nil
	}
	if len(img.Packages.Repositories) > 0 && !apkRepositories(img) {
		return false, nil, nil
	}
	var prevPkgs *lockfiles.Pin
	if prev != nil {
		prevPkgs = prev.Inputs[lockfiles.PackagesKey]
	}
	if prevPkgs != nil && prevPkgs.Kind == lockfiles.KindDebPackages && !apkRepositories(img) {
		if old := prev.Inputs["base"]; old != nil && old.Digest == basePin.Digest && old.Manifest == basePin.Manifest {
			return false, nil, nil
		}
	}
	digest := apkPackagesDigest(img, basePin)
	source := strings.Join(img.Packages.Requests, ", ")
	if !upgrade && prevPkgs != nil && prevPkgs.Kind == lockfiles.KindApkPackages && prevPkgs.Digest == digest && prev.Platform == img.Platform.String() {
		out := map[string]*lockfiles.Pin{}
		complete := true
		for k, p := range prev.Inputs {
			if strings.HasPrefix(k, lockfiles.PackageKeyPrefix) {
				complete = complete && p.Kind == lockfiles.KindApkPackage && p.Version != "" && p.SHA256 != "" && p.Filename != "" && p.Size != ""
				out[k] = clonePin(p)
			}
		}
		if complete && len(out) > 0 {
			out[lockfiles.PackagesKey] = clonePin(prevPkgs)
			out[lockfiles.PackagesKey].Source = source
			return true, out, nil
		}
	}
	base, err := s.ApkBase(ctx, img, basePin)
	if err != nil {
		return true, nil, err
	}
	if base == nil {
		if apkRepositories(img) {
			return true, nil, fmt.Errorf("%s names Alpine repositories, but its base image has neither /%s nor %s", img.Addr(), alpineRelease, apkrepo.InstalledPath)
		}
		return false, nil, nil
	}
	pins, err := s.resolveApk(ctx, img, base, prev, upgrade)
	if err != nil {
		return true, nil, err
	}
	pins[lockfiles.PackagesKey] = &lockfiles.Pin{Source: source, Kind: lockfiles.KindApkPackages, Digest: digest}
	return true, pins, nil
}

// resolveApk resolves and fetches the closure of img's requests over an
// Alpine base.
func (s *Set) resolveApk(ctx context.Context, img *lang.Image, base *apkrepo.Base, prev *lockfiles.Image, upgrade bool) (map[string]*lockfiles.Pin, error) {
	repos, keys, err := ApkSources(img, s.dir, base)
	if err != nil {
		return nil, err
	}
	arch, err := ApkArch(img.Platform, base)
	if err != nil {
		return nil, err
	}
	reqs, err := ApkWorld(img)
	if err != nil {
		return nil, err
	}
	cl, err := s.apkClient(arch, keys)
	if err != nil {
		return nil, err
	}
	ix, err := cl.Index(ctx, repos)
	if err != nil {
		return nil, err
	}
	opts := apkrepo.ResolveOptions{Installed: base.Installed, Prefer: map[string]string{}}
	if prev != nil && !upgrade {
		if p := prev.Inputs[lockfiles.PackagesKey]; p != nil && p.Kind == lockfiles.KindApkPackages {
			for k, p := range prev.Inputs {
				if name, ok := strings.CutPrefix(k, lockfiles.PackageKeyPrefix); ok {
					opts.Prefer[name] = p.Version
				}
			}
		}
	}
	pkgs, err := apkrepo.Resolve(ix, reqs, opts)
	if err != nil {
		return nil, err
	}
	out := map[string]*lockfiles.Pin{}
	for _, p := range pkgs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, err := cl.Fetch(ctx, p)
		if err != nil {
			return nil, err
		}
		out[lockfiles.PackageKeyPrefix+p.Name] = &lockfiles.Pin{
			Source:       p.Name,
			Kind:         lockfiles.KindApkPackage,
			Version:      f.Pin.Version,
			Architecture: f.Pin.Arch,
			Filename:     f.Pin.Filename,
			SHA256:       f.Pin.SHA256,
			Size:         strconv.FormatInt(f.Pin.Size, 10),
		}
	}
	s.log.Info("resolved Alpine packages", "image", img.Name, "requested", len(reqs), "packages", len(pkgs))
	return out, nil
}

// apkClient returns the Alpine repository client for arch trusting keys.
func (s *Set) apkClient(arch string, keys apkrepo.Keys) (*apkrepo.Client, error) {
	c := apkrepo.Client{HTTP: s.http, Logger: s.log}
	if s.apkRepo != nil {
		c = *s.apkRepo
	}
	c.Arch, c.Keys = arch, keys
	if c.Cache == nil {
		ch, err := cache.Open(hostenv.Get(s.environ, cache.EnvRoot))
		if err != nil {
			return nil, err
		}
		c.Cache = ch
	}
	return &c, nil
}
