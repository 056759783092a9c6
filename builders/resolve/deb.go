package resolve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/lockfiles"
)

// AptDownloader fetches one Debian package into dir and returns the path
// of the .deb it wrote. name may carry an architecture qualifier
// ("busybox-static:arm64"). Implementations use the machine's own apt
// sources: no mirror is ever named by sbx.
type AptDownloader interface {
	Download(ctx context.Context, name, version, dir string) (path string, err error)
}

// AptGet downloads packages with `apt-get download NAME=VERSION`, which
// needs no root and verifies the package against the signed apt indexes.
type AptGet struct {
	// Environ is the environment of apt-get; nil means the process's own.
	Environ []string
}

var _ AptDownloader = (*AptGet)(nil)

// Download runs apt-get download in dir and returns the one .deb it wrote.
func (a *AptGet) Download(ctx context.Context, name, version, dir string) (string, error) {
	spec := name + "=" + version
	cmd := exec.CommandContext(ctx, "apt-get", "download", "-q", "-o", "Debug::NoLocking=1", spec)
	cmd.Dir = dir
	cmd.Env = a.Environ
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("deb: sources are downloaded with the host's apt-get, which is not on PATH: run sbx lock and build for images with deb: sources on a Debian or Ubuntu host (%w)", err)
		}
		msg := lastLines(out.String(), 5)
		if strings.Contains(name, ":") && strings.Contains(msg, "Unable to locate") {
			msg += " (a foreign architecture must first be added with dpkg --add-architecture and apt-get update)"
		}
		return "", fmt.Errorf("apt-get download %s: %v: %s", spec, err, msg)
	}
	debs, err := filepath.Glob(filepath.Join(dir, "*.deb"))
	if err != nil {
		return "", err
	}
	if len(debs) != 1 {
		return "", fmt.Errorf("apt-get download %s wrote %d .deb files, want 1", spec, len(debs))
	}
	return debs[0], nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

// debResolver pins Debian packages by version and .deb sha256.
type debResolver struct {
	apt AptDownloader
}

var _ Resolver = (*debResolver)(nil)

func (r *debResolver) Resolve(ctx context.Context, src *lang.Source, platform lang.Platform) (*lockfiles.Pin, error) {
	if src.Ref == "" || src.Version == "" {
		return nil, fmt.Errorf("a Debian package source is deb:NAME=VERSION with an exact version")
	}
	arch, err := debArch(platform)
	if err != nil {
		return nil, err
	}
	name := src.Ref
	if host, _ := debArch(lang.Platform{OS: "linux", Architecture: runtime.GOARCH, Variant: goarmVariant()}); arch != host {
		name += ":" + arch
	}
	dir, err := os.MkdirTemp("", "sbx-deb-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// apt drops privileges to _apt for downloads when run as root; let it
	// write here.
	_ = os.Chmod(dir, 0o755)
	path, err := r.apt.Download(ctx, name, src.Version, dir)
	if err != nil {
		return nil, err
	}
	file := filepath.Base(path)
	if err := checkDebFilename(file, src.Ref, src.Version, arch); err != nil {
		return nil, err
	}
	sum, err := hashFile(path, "")
	if err != nil {
		return nil, err
	}
	return &lockfiles.Pin{Version: src.Version, SHA256: sum, Filename: file}, nil
}

// checkDebFilename checks the downloaded file is the package asked for:
// apt names it NAME_VERSION_ARCH.deb with the version's ':' written %3a.
func checkDebFilename(file, name, version, arch string) error {
	base, ok := strings.CutSuffix(file, ".deb")
	parts := strings.Split(base, "_")
	if !ok || len(parts) != 3 {
		return fmt.Errorf("downloaded %s, not a NAME_VERSION_ARCH.deb file", file)
	}
	v, err := url.PathUnescape(parts[1])
	if err != nil {
		v = parts[1]
	}
	if parts[0] != name || v != version || (parts[2] != arch && parts[2] != "all") {
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
