package pipeline

import (
	"log/slog"
	"net/http"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/sbx-dev/sbx/internal/build/fetch"
	"github.com/sbx-dev/sbx/internal/build/imagereg"
	"github.com/sbx-dev/sbx/internal/build/mirror"
	"github.com/sbx-dev/sbx/internal/build/resolve"
	"github.com/sbx-dev/sbx/internal/hostenv"
)

// Env is what the pipeline reads from outside the configuration. The
// zero value means the process's environment and default clients.
type Env struct {
	// Environ is the environment, as os.Environ returns it: npm and apt
	// configuration, SBX_CACHE_DIR, SBX_MIRROR_DIR, SBX_GUEST_AGENT and
	// SOURCE_DATE_EPOCH are read from it. Nil means os.Environ().
	Environ []string
	// HTTPClient fetches npm packages and https URLs and, through its
	// transport, OCI registries. Nil means a default client.
	HTTPClient *http.Client
	// Keychain authenticates to OCI registries; nil means the docker and
	// podman credential stores.
	Keychain authn.Keychain
	// Logger receives the resolvers' and builders' progress; nil
	// discards it.
	Logger *slog.Logger
}

func (e Env) environ() []string {
	if e.Environ == nil {
		return os.Environ()
	}
	return e.Environ
}

// Getenv returns the value of the environment variable name in
// e.Environ (the last one set wins) and whether it is set.
func (e Env) Getenv(name string) (string, bool) {
	return hostenv.Lookup(e.environ(), name)
}

// ociOptions make registry calls use HTTPClient's transport.
func (e Env) ociOptions() []remote.Option {
	if e.HTTPClient == nil || e.HTTPClient.Transport == nil {
		return nil
	}
	return []remote.Option{remote.WithTransport(e.HTTPClient.Transport)}
}

// fetchOptions are the options of fetching the inputs of the
// configuration in dir.
func (e Env) fetchOptions(dir string) fetch.Options {
	return fetch.Options{
		Dir:        dir,
		Environ:    e.environ(),
		HTTPClient: e.HTTPClient,
		Keychain:   e.Keychain,
		OCIOptions: e.ociOptions(),
		Logger:     e.Logger,
		MirrorDir:  e.mirrorDir(),
	}
}

// mirrorDir is the directory of local copies of url inputs that
// $SBX_MIRROR_DIR names (package internal/build/mirror), or "".
func (e Env) mirrorDir() string {
	dir, _ := e.Getenv(mirror.EnvVar)
	return dir
}

// resolveOptions are the options of resolving the pins of the
// configuration in dir: those of fetching its inputs.
func (e Env) resolveOptions(dir string) resolve.Options {
	f := e.fetchOptions(dir)
	return resolve.Options{Dir: f.Dir, Environ: f.Environ, HTTPClient: f.HTTPClient, Keychain: f.Keychain, OCIOptions: f.OCIOptions, Logger: f.Logger, MirrorDir: f.MirrorDir}
}

// Registry is how sbx push and pull reach a registry: env's keychain
// (nil: the docker and podman credential stores) and transport.
func (e Env) Registry() imagereg.Options {
	kc := e.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	return imagereg.Options{Keychain: kc, Remote: e.ociOptions()}
}
