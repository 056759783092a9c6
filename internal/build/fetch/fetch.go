package fetch

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sbx-dev/sbx/internal/build/apt"
	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/digest"
	"github.com/sbx-dev/sbx/internal/build/download"
	"github.com/sbx-dev/sbx/internal/build/localsrc"
	"github.com/sbx-dev/sbx/internal/build/mirror"
	"github.com/sbx-dev/sbx/internal/build/npmreg"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/recipe"
	"github.com/sbx-dev/sbx/lang"
)

// Options configure Inputs. The zero value fetches with the process's own
// environment and network.
type Options struct {
	// Dir is the configuration directory: relative file: and oci-layout:
	// paths are relative to it, and npm reads the project .npmrc from it.
	// Local sources are read only inside it or inside the image's
	// host_paths entry that holds them (lang.Source.LocalRoot).
	Dir string
	// Environ is where npm configuration is read from (see package
	// builders/npmreg) and the environment of apt-get; nil means
	// os.Environ().
	Environ []string
	// HTTPClient fetches npm tarballs and https URLs; nil means a client
	// with the default transport.
	HTTPClient *http.Client
	// Keychain authenticates to OCI registries; nil means
	// authn.DefaultKeychain.
	Keychain authn.Keychain
	// OCIOptions are passed to every registry call after the keychain.
	OCIOptions []remote.Option
	// Apt downloads Debian packages; nil means apt.Get.
	Apt apt.Downloader
	// Progress, if set, is called as bytes arrive for an input, keyed as
	// the lock keys it ("base", "artifact.claude"); total is -1 when
	// unknown. For an image, done and total count all of its missing
	// blobs together. It is called from the goroutine running Inputs.
	Progress func(key string, done, total int64)
	// Logger receives what is fetched and what is found in the cache, at
	// debug level; nil discards it.
	Logger *slog.Logger
	// MirrorDir is a directory of local copies of url inputs (package
	// internal/build/mirror): a file in it with the pinned sha256 is
	// copied into the cache instead of downloading. "" means none.
	MirrorDir string
}

// Blob is a file in the cache.
type Blob struct {
	// Digest is "sha256:<hex>".
	Digest string
	// MediaType is the OCI descriptor's media type; empty for files.
	MediaType string
	Size      int64
	// Path is the blob's path in the cache.
	Path string
}

// Fetched is what the cache holds for one input.
type Fetched struct {
	// Key is the input's lock key: "base", "kernel", "artifact.NAME".
	Key  string
	Kind lang.SourceKind
	// File is the fetched file of npm, url, file and deb sources: the
	// tarball, the download, the file's copy, the .deb.
	File *Blob
	// Manifest, Config and Layers are set for oci and oci-layout
	// sources: the platform's image manifest, its config blob, and its
	// layer blobs in manifest order, compressed as the registry or layout
	// stores them.
	Manifest *Blob
	Config   *Blob
	Layers   []Blob
}

// Inputs fetches every input of img, as lock pins it, into c and returns
// what the cache holds for each, by lock key. An input the lock does not
// pin, or pins for another source than the spec now names, is an error
// that says to run `sbx lock`. Errors name the image, the input's key and
// its source.
func Inputs(ctx context.Context, img *lang.Image, lock *lockfiles.Image, c *cache.Cache, opts Options) (map[string]Fetched, error) {
	f := newFetcher(c, opts)
	out := map[string]Fetched{}
	for _, in := range recipe.Inputs(img) {
		what := fmt.Sprintf("image.%s input %s (%s)", img.Name, in.Key, shownSource(in.Source))
		var pin *lockfiles.Pin
		if lock != nil {
			pin = lock.Inputs[in.Key]
		}
		if pin == nil {
			return nil, fmt.Errorf("%s is not locked: run sbx lock", what)
		}
		if pin.Source != in.Source.Raw || pin.Kind != string(in.Source.Kind) {
			return nil, fmt.Errorf("%s: the lock pins %q, not this source: run sbx lock", what, shownRaw(pin.Source))
		}
		got, err := f.input(ctx, in.Key, in.Source, pin)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		got.Key, got.Kind = in.Key, in.Source.Kind
		out[in.Key] = got
	}
	return out, nil
}

// fetcher holds what fetching needs, made at most once.
type fetcher struct {
	c      *cache.Cache
	opts   Options
	log    *slog.Logger
	client *http.Client
	npmReg *npmreg.Registry
}

func newFetcher(c *cache.Cache, opts Options) *fetcher {
	if opts.Environ == nil {
		opts.Environ = os.Environ()
	}
	if opts.Keychain == nil {
		opts.Keychain = authn.DefaultKeychain
	}
	if opts.Apt == nil {
		opts.Apt = &apt.Get{Environ: opts.Environ}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{}
	}
	return &fetcher{c: c, opts: opts, log: log, client: client, npmReg: npmreg.New(opts.Dir, opts.Environ, client)}
}

func (f *fetcher) input(ctx context.Context, key string, src *lang.Source, pin *lockfiles.Pin) (Fetched, error) {
	switch src.Kind {
	case lang.SourceOCI, lang.SourceOCILayout:
		return f.image(ctx, key, src, pin)
	case lang.SourceNPM:
		return f.npm(ctx, key, src, pin)
	case lang.SourceURL:
		return f.url(ctx, key, src, pin)
	case lang.SourceFile:
		return f.file(ctx, src, pin)
	case lang.SourceDeb:
		return f.deb(ctx, key, src, pin)
	}
	return Fetched{}, fmt.Errorf("unknown source kind %q", src.Kind)
}

// cached returns the blob of a file pin if the cache has it.
func (f *fetcher) cached(sha string) (*Blob, bool) {
	p, ok := f.c.Path(sha)
	if !ok {
		return nil, false
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, false
	}
	return &Blob{Digest: "sha256:" + strings.ToLower(sha), Size: fi.Size(), Path: p}, true
}

// pinSHA256 returns a file pin's sha256, checked for form.
func pinSHA256(pin *lockfiles.Pin) (string, error) {
	if pin.SHA256 == "" {
		return "", errors.New("the lock records no sha256: run sbx lock")
	}
	h, err := cache.ParseDigest(pin.SHA256)
	if err != nil {
		return "", fmt.Errorf("the lock's sha256: %w", err)
	}
	return h, nil
}

func (f *fetcher) url(ctx context.Context, key string, src *lang.Source, pin *lockfiles.Pin) (Fetched, error) {
	sha, err := pinSHA256(pin)
	if err != nil {
		return Fetched{}, err
	}
	if b, ok := f.cached(sha); ok {
		f.log.Debug("in cache", "input", key, "digest", b.Digest)
		return Fetched{File: b}, nil
	}
	u, err := url.Parse(src.Ref)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return Fetched{}, errors.New("only https URLs can be sources")
	}
	found, err := mirror.Find(ctx, f.opts.MirrorDir, src.Ref, sha)
	if err != nil {
		return Fetched{}, err
	}
	if found.Path != "" {
		p, err := f.c.PutFile(ctx, sha, found.Path)
		if err != nil {
			return Fetched{}, mismatch(found.Path, "", err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			return Fetched{}, err
		}
		f.log.Debug("copied from the mirror directory", "input", key, "path", found.Path)
		return Fetched{File: &Blob{Digest: "sha256:" + sha, Size: fi.Size(), Path: p}}, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src.Ref, nil)
	if err != nil {
		return Fetched{}, errors.New("invalid URL")
	}
	req.Header.Set("User-Agent", "sbx")
	b, err := f.download(ctx, key, download.HTTPSOnly(f.client), req, sha, "")
	if err != nil {
		var me *digest.MismatchError
		if errors.As(err, &me) || ctx.Err() != nil {
			return Fetched{}, err
		}
		return Fetched{}, fmt.Errorf("%w. %s", err, mirror.Hint(src, sha, f.opts.MirrorDir, found))
	}
	return Fetched{File: b}, nil
}

func (f *fetcher) npm(ctx context.Context, key string, src *lang.Source, pin *lockfiles.Pin) (Fetched, error) {
	sha, err := pinSHA256(pin)
	if err != nil {
		return Fetched{}, err
	}
	if pin.Version == "" || pin.Integrity == "" {
		return Fetched{}, errors.New("the lock records no version or integrity: run sbx lock")
	}
	if b, ok := f.cached(sha); ok {
		f.log.Debug("in cache", "input", key, "digest", b.Digest)
		return Fetched{File: b}, nil
	}
	doc, err := f.npmReg.Lookup(ctx, src.Ref)
	if err != nil {
		return Fetched{}, err
	}
	tarURL, header, err := doc.Tarball(pin.Version)
	if err != nil {
		return Fetched{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tarURL, nil)
	if err != nil {
		return Fetched{}, fmt.Errorf("tarball URL: %w", err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	b, err := f.download(ctx, key, f.client, req, sha, pin.Integrity)
	if err != nil {
		return Fetched{}, err
	}
	return Fetched{File: b}, nil
}

func (f *fetcher) file(ctx context.Context, src *lang.Source, pin *lockfiles.Pin) (Fetched, error) {
	sha, err := pinSHA256(pin)
	if err != nil {
		return Fetched{}, err
	}
	// A local file is always read, even when the cache has its pin: a file
	// that changed since the lock must be an error, not silently replaced.
	// It is opened inside its confining directory (package localsrc),
	// so that a symbolic link cannot swap in a file from elsewhere.
	fh, path, err := localsrc.OpenFile(f.opts.Dir, src)
	if err != nil {
		return Fetched{}, err
	}
	defer fh.Close()
	if b, ok := f.cached(sha); ok {
		if err := hashMatches(ctx, fh, path, sha); err != nil {
			return Fetched{}, err
		}
		return Fetched{File: b}, nil
	}
	_, err = f.c.Put(ctx, sha, func(w io.Writer) error {
		_, err := io.Copy(w, fh)
		return err
	})
	if err != nil {
		return Fetched{}, mismatch(path, "changed since it was locked", err)
	}
	b, _ := f.cached(sha)
	return Fetched{File: b}, nil
}

// hashMatches checks that what r holds (the file at path) hashes to sha
// (hex).
func hashMatches(ctx context.Context, r io.Reader, path, sha string) error {
	got, _, err := digest.Reader(ctx, r)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if got != sha {
		return fmt.Errorf("%s changed since it was locked: %w", path,
			&digest.MismatchError{Input: path, Algo: "sha256", Want: sha, Got: got})
	}
	return nil
}

func (f *fetcher) deb(ctx context.Context, key string, src *lang.Source, pin *lockfiles.Pin) (Fetched, error) {
	sha, err := pinSHA256(pin)
	if err != nil {
		return Fetched{}, err
	}
	if b, ok := f.cached(sha); ok {
		f.log.Debug("in cache", "input", key, "digest", b.Digest)
		return Fetched{File: b}, nil
	}
	name, err := debName(src, pin)
	if err != nil {
		return Fetched{}, err
	}
	dir, err := os.MkdirTemp(filepath.Join(f.c.Root(), "tmp"), "deb-*")
	if err != nil {
		return Fetched{}, err
	}
	defer os.RemoveAll(dir)
	// apt drops privileges to _apt for downloads when run as root; let it
	// write here.
	_ = os.Chmod(dir, 0o755)
	if f.opts.Progress != nil {
		f.opts.Progress(key, 0, -1)
	}
	path, err := f.opts.Apt.Download(ctx, name, pin.Version, dir)
	if err != nil {
		if ctx.Err() == nil {
			// Debian's mirrors drop a version once a security or point
			// release replaces it.
			err = fmt.Errorf("%w (if no apt source offers %s %s any more, sbx lock -upgrade pins the version apt has now)", err, name, pin.Version)
		}
		return Fetched{}, err
	}
	if got := filepath.Base(path); pin.Filename != "" && got != pin.Filename {
		return Fetched{}, fmt.Errorf("apt downloaded %s, but the lock pins %s", got, pin.Filename)
	}
	if _, err := f.c.PutFile(ctx, sha, path); err != nil {
		return Fetched{}, mismatch(path, "", err)
	}
	b, _ := f.cached(sha)
	if f.opts.Progress != nil {
		f.opts.Progress(key, b.Size, b.Size)
	}
	return Fetched{File: b}, nil
}

// debName is the package name to ask apt for: the package of the pinned
// file (NAME_VERSION_ARCH.deb), which for a kernel source naming a meta
// package is the kernel package it led to, else the source's; with the
// file's architecture unless that is "all", so that a package for
// another platform than the host's is the one downloaded.
func debName(src *lang.Source, pin *lockfiles.Pin) (string, error) {
	if src.Ref == "" || pin.Version == "" {
		return "", errors.New("the lock records no version: run sbx lock")
	}
	base, ok := strings.CutSuffix(pin.Filename, ".deb")
	parts := strings.Split(base, "_")
	if !ok || len(parts) != 3 || parts[0] == "" {
		return src.Ref, nil
	}
	if arch := parts[2]; arch != "all" && arch != "" {
		return parts[0] + ":" + arch, nil
	}
	return parts[0], nil
}

// download streams req's response into the cache under sha, checking it
// also against an SRI integrity string when one is given.
func (f *fetcher) download(ctx context.Context, key string, client *http.Client, req *http.Request, sha, integrity string) (*Blob, error) {
	shown := download.Redact(req.URL.String())
	var sri hash.Hash
	var wantSRI string
	if integrity != "" {
		algo, _, ok := strings.Cut(integrity, "-")
		if !ok || algo != "sha512" {
			return nil, fmt.Errorf("the lock's integrity %q is not sha512: run sbx lock", integrity)
		}
		sri, wantSRI = sha512.New(), integrity
	}
	var n int64
	path, err := f.c.Put(ctx, sha, func(w io.Writer) error {
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("GET %s: %w", shown, download.StripURLError(err))
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: server answered %s", shown, resp.Status)
		}
		h256 := sha256.New()
		dst := io.MultiWriter(w, h256)
		if sri != nil {
			dst = io.MultiWriter(dst, sri)
		}
		pw := &progressWriter{w: dst, key: key, total: resp.ContentLength, report: f.opts.Progress}
		pw.tick(0)
		n, err = io.Copy(pw, resp.Body)
		if err != nil {
			return fmt.Errorf("GET %s: download failed after %d bytes: %w", shown, n, err)
		}
		if resp.ContentLength >= 0 && n != resp.ContentLength {
			return fmt.Errorf("GET %s: truncated download: got %d of %d bytes", shown, n, resp.ContentLength)
		}
		// A wrong sha256 is the cache's to report; the integrity is
		// checked for content that has the pinned sha256.
		if sri != nil && hex.EncodeToString(h256.Sum(nil)) == sha {
			got := "sha512-" + base64.StdEncoding.EncodeToString(sri.Sum(nil))
			if got != wantSRI {
				return &digest.MismatchError{Input: shown, Algo: "sha512", Want: wantSRI, Got: got}
			}
		}
		return nil
	})
	if err != nil {
		return nil, mismatch(shown, "", err)
	}
	f.log.Debug("fetched", "input", key, "url", shown, "bytes", n)
	return &Blob{Digest: "sha256:" + sha, Size: n, Path: path}, nil
}

// mismatch turns the cache's *cache.MismatchError into a
// *digest.MismatchError naming input; other errors pass unchanged.
func mismatch(input, note string, err error) error {
	var me *cache.MismatchError
	if !errors.As(err, &me) {
		return err
	}
	e := &digest.MismatchError{
		Input: input, Algo: "sha256",
		Want: strings.TrimPrefix(me.Want, "sha256:"), Got: strings.TrimPrefix(me.Got, "sha256:"),
	}
	if note != "" {
		return fmt.Errorf("%s %s: %w", input, note, e)
	}
	return e
}

// progressWriter reports bytes written.
type progressWriter struct {
	w      io.Writer
	key    string
	done   int64
	total  int64
	report func(key string, done, total int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.tick(int64(n))
	return n, err
}

func (p *progressWriter) tick(n int64) {
	p.done += n
	if p.report != nil {
		p.report(p.key, p.done, p.total)
	}
}

// shownSource is a source as written, without URL credentials.
func shownSource(src *lang.Source) string { return shownRaw(src.Raw) }

func shownRaw(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil && u.Host != "" {
		return download.Redact(raw)
	}
	return raw
}
