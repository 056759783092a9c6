package resolve

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sbx-dev/sbx/internal/build/apkrepo"
	"github.com/sbx-dev/sbx/internal/build/apt"
	"github.com/sbx-dev/sbx/internal/build/debrepo"
	"github.com/sbx-dev/sbx/internal/build/download"
	"github.com/sbx-dev/sbx/internal/build/npmreg"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/recipe"
	"github.com/sbx-dev/sbx/lang"
)

// Resolver pins one kind of source.
type Resolver interface {
	// Resolve returns the pin of src for an image of the given platform.
	// Errors name what was read (a reference, URL or path).
	Resolve(ctx context.Context, src *lang.Source, platform lang.Platform) (*lockfiles.Pin, error)
}

// kernelResolver is a Resolver that pins an image's kernel differently
// from its other inputs (the deb resolver follows kernel meta packages).
type kernelResolver interface {
	ResolveKernel(ctx context.Context, src *lang.Source, platform lang.Platform) (*lockfiles.Pin, error)
}

// Options configure a Set. The zero value resolves against the process's
// own environment and network.
type Options struct {
	// Dir is the configuration directory. Relative file: and oci-layout:
	// paths are relative to it, and npm reads the project .npmrc from it.
	Dir string
	// Environ is the environment npm configuration is read from
	// (NPM_CONFIG_REGISTRY, npm_config_*, NPM_CONFIG_USERCONFIG, HOME for
	// ~/.npmrc, and ${VAR} references inside .npmrc files). It is also the
	// environment of the npm and apt-get commands run. Nil means
	// os.Environ().
	Environ []string
	// HTTPClient fetches npm packuments and tarballs and https URLs.
	// Nil means a client with the default transport.
	HTTPClient *http.Client
	// Keychain authenticates to OCI registries; nil means
	// authn.DefaultKeychain (the docker and podman credential stores).
	Keychain authn.Keychain
	// OCIOptions are passed to every registry call after the keychain.
	OCIOptions []remote.Option
	// Apt downloads Debian packages; nil means apt.Get, which runs
	// apt-get download with the machine's apt sources. A deb source
	// without an exact version also needs it to implement apt.Lister
	// (apt.Get asks apt-cache policy).
	Apt apt.Downloader
	// Logger receives progress at debug and info level; nil discards it.
	Logger *slog.Logger
	// InputHash computes an image's input hash from its pins; nil means
	// recipe.InputHash. The lock keeps an image's outputs only while its
	// input hash is unchanged.
	InputHash func(img *lang.Image, pins map[string]*lockfiles.Pin) (string, error)
	// AptRoot is the root of the apt configuration whose sources images
	// with packages but no repositories use; "" means "/".
	AptRoot string
	// DebRepo is the template of the client package sets are resolved
	// with (its Arch is set per image); nil means one with HTTPClient and
	// the cache Environ's SBX_CACHE_DIR names, else the default cache.
	DebRepo *debrepo.Client
	// ApkRepo is the template of the client Alpine package sets are
	// resolved with (its Arch and Keys are set per image); nil means one
	// with HTTPClient and the cache as for DebRepo.
	ApkRepo *apkrepo.Client
	// MirrorDir is a directory of local copies of url inputs (package
	// internal/build/mirror): a url source with a declared sha256 is
	// pinned without a download when a file in it has that sha256. ""
	// means none.
	MirrorDir string
}

// Set pins sources of every kind, dispatching on lang.SourceKind.
type Set struct {
	resolvers map[lang.SourceKind]Resolver
	log       *slog.Logger
	inputHash func(img *lang.Image, pins map[string]*lockfiles.Pin) (string, error)
	dir       string
	aptRoot   string
	http      *http.Client
	debRepo   *debrepo.Client
	apkRepo   *apkrepo.Client
	environ   []string
}

var _ Resolver = (*Set)(nil)

// New returns a Set with a resolver for every source kind.
func New(opts Options) *Set {
	if opts.Environ == nil {
		opts.Environ = os.Environ()
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.Keychain == nil {
		opts.Keychain = authn.DefaultKeychain
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Apt == nil {
		opts.Apt = &apt.Get{Environ: opts.Environ}
	}
	ih := opts.InputHash
	if ih == nil {
		ih = recipe.InputHash
	}
	oci := &ociResolver{keychain: opts.Keychain, options: opts.OCIOptions}
	return &Set{
		resolvers: map[lang.SourceKind]Resolver{
			lang.SourceOCI:       oci,
			lang.SourceOCILayout: &layoutResolver{dir: opts.Dir},
			lang.SourceNPM:       &npmResolver{reg: npmreg.New(opts.Dir, opts.Environ, opts.HTTPClient), client: opts.HTTPClient},
			lang.SourceURL:       &urlResolver{client: opts.HTTPClient, mirrorDir: opts.MirrorDir},
			lang.SourceFile:      &fileResolver{dir: opts.Dir},
			lang.SourceDeb:       &debResolver{apt: opts.Apt},
		},
		log:       opts.Logger,
		inputHash: ih,
		dir:       opts.Dir,
		aptRoot:   opts.AptRoot,
		http:      opts.HTTPClient,
		debRepo:   opts.DebRepo,
		apkRepo:   opts.ApkRepo,
		environ:   opts.Environ,
	}
}

// Resolve pins src with the resolver for its kind. The error names the
// source as written (without URL credentials).
func (s *Set) Resolve(ctx context.Context, src *lang.Source, platform lang.Platform) (*lockfiles.Pin, error) {
	return s.resolve(ctx, src, platform, false)
}

// ResolveKernel pins src as the source of an image's kernel: as Resolve,
// except that a deb: source naming a kernel meta package
// (deb:linux-image-amd64, which holds no kernel) is followed to the
// versioned package it depends on (linux-image-6.1.0-57-amd64), at the
// exact version the meta package requires, and that package is pinned:
// the pin's Filename names it.
func (s *Set) ResolveKernel(ctx context.Context, src *lang.Source, platform lang.Platform) (*lockfiles.Pin, error) {
	return s.resolve(ctx, src, platform, true)
}

func (s *Set) resolve(ctx context.Context, src *lang.Source, platform lang.Platform, asKernel bool) (*lockfiles.Pin, error) {
	r, ok := s.resolvers[src.Kind]
	if !ok {
		return nil, fmt.Errorf("%s: unknown source kind %q", displaySource(src), src.Kind)
	}
	s.log.Debug("resolving source", "kind", string(src.Kind), "source", displaySource(src), "platform", platform.String())
	var pin *lockfiles.Pin
	var err error
	if kr, ok := r.(kernelResolver); ok && asKernel {
		pin, err = kr.ResolveKernel(ctx, src, platform)
	} else {
		pin, err = r.Resolve(ctx, src, platform)
	}
	if err != nil {
		if shown := displaySource(src); !strings.Contains(err.Error(), shown) {
			err = fmt.Errorf("%s: %w", shown, err)
		}
		return nil, err
	}
	pin.Source = src.Raw
	pin.Kind = string(src.Kind)
	s.log.Info("pinned source", "kind", pin.Kind, "source", displaySource(src), "version", pin.Version, "file", pin.Filename, "digest", pinDigest(pin))
	return pin, nil
}

// displaySource is the source as written, minus URL credentials.
func displaySource(src *lang.Source) string {
	if src.Kind == lang.SourceURL {
		return download.Redact(src.Raw)
	}
	return src.Raw
}

// pinDigest is the field of a pin that identifies its content, for logs.
func pinDigest(p *lockfiles.Pin) string {
	switch {
	case p.Manifest != "":
		return p.Manifest
	case p.SHA256 != "":
		return "sha256:" + p.SHA256
	}
	return p.Digest
}
