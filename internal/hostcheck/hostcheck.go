package hostcheck

import (
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/sbx-dev/sbx/internal/hostenv"
	"github.com/sbx-dev/sbx/lang"
)

// Status is the outcome of one check.
type Status string

// The outcomes, from best to worst.
const (
	// OK: nothing to do.
	OK Status = "ok"
	// Warn: sbx works, but slower or less safely than it could, or will
	// fail at a later step unless the Fix is applied.
	Warn Status = "warn"
	// Fail: what the check covers does not work until the Fix is applied.
	Fail Status = "fail"
)

func (s Status) rank() int {
	switch s {
	case Warn:
		return 1
	case Fail:
		return 2
	}
	return 0
}

// Result is the outcome of one check. Its JSON form is what
// "sbx doctor -json" prints for each check.
type Result struct {
	// Name says what was checked: "qemu" (the emulator for the host's
	// architecture), "qemu-ARCH" (for another architecture a
	// configuration's images use, such as "qemu-arm64"), "accel",
	// "mounts", "config", "apt", "npm", "oci", "bindings", "runtime-dir"
	// or "cache-dir".
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Detail says what was found, naming paths, versions and commands.
	Detail string `json:"detail"`
	// Fix is the command that fixes a warning or failure on this OS, or
	// a sentence where no single command does; empty when Status is OK.
	Fix string `json:"fix,omitempty"`
}

// Worst returns the worst status among results: OK when all are OK (or
// there are none).
func Worst(results []Result) Status {
	w := OK
	for _, r := range results {
		if r.Status.rank() > w.rank() {
			w = r.Status
		}
	}
	return w
}

// DefaultMinFree is the free space below which the cache directory's
// file system is a warning: one image build of the quickstart needs
// about a gigabyte, a realistic one several.
const DefaultMinFree = 5 << 30

// Options are the inputs of Run.
type Options struct {
	// Environ is the environment in os.Environ form. PATH is where the
	// programs checked are looked for; HOME, TMPDIR, XDG_RUNTIME_DIR,
	// XDG_STATE_HOME, SBX_RUNTIME_DIR and SBX_CACHE_DIR locate the
	// directories; apt-cache and npm run with it.
	Environ []string
	// Config is the configuration whose needs are checked: its images'
	// platforms add emulators, and its source kinds add the apt (deb:),
	// npm (npm:) and registry (OCI references) checks. Nil checks the
	// host alone.
	Config *lang.Config
	// ConfigErrors are the summaries of the errors loading Config gave;
	// any makes the "config" check fail.
	ConfigErrors []string
	// Keychain is the keychain OCI pulls authenticate with; nil means
	// authn.DefaultKeychain, as sbx uses.
	Keychain authn.Keychain
	// MinFree is the free space the cache directory's file system should
	// have; zero means DefaultMinFree.
	MinFree uint64
	// AccelTimeout bounds the accelerator's test guest; zero means
	// internal/machine/qemu's default.
	AccelTimeout time.Duration
	// OSRelease is the os-release file that says which package manager
	// this OS uses; empty means /etc/os-release.
	OSRelease string
}

func (o *Options) getenv(name string) string { return hostenv.Get(o.Environ, name) }

// Run runs every check that applies and returns their results in a fixed
// order: the emulators, acceleration, the configuration and its sources'
// tools, the bindings file, the runtime directory and the cache directory. It never fails as
// a whole: what cannot be checked is a result of its own. ctx bounds the
// programs it runs.
func Run(ctx context.Context, opts Options) []Result {
	pm := Detect(opts.OSRelease, opts.getenv("PATH"))
	var out []Result
	out = append(out, checkQEMU(ctx, &opts, pm, archs(opts.Config))...)
	if opts.Config != nil {
		out = append(out, checkConfig(&opts))
		kinds := sourceKinds(opts.Config)
		if kinds[lang.SourceDeb] || hostAptPackagesIn(opts.Config) {
			out = append(out, checkApt(ctx, &opts, pm))
		}
		if kinds[lang.SourceNPM] {
			out = append(out, checkNPM(ctx, &opts, pm))
		}
		if kinds[lang.SourceOCI] {
			out = append(out, checkOCI(ctx, &opts))
		}
		if provisions(opts.Config) {
			out = append(out, checkQemuImg(&opts, pm))
		}
	}
	out = append(out, checkBindings(&opts))
	out = append(out, checkRuntimeDir(&opts))
	out = append(out, checkCacheDir(&opts))
	return out
}

// provisions reports whether an image of cfg has provision steps, whose
// build flattens the provisioning machine's disk with qemu-img.
func provisions(cfg *lang.Config) bool {
	for _, img := range cfg.Images {
		if len(img.Provision) > 0 {
			return true
		}
	}
	return false
}

// checkQemuImg checks that qemu-img, which a provisioned image's build
// runs (internal/build/provision), is in PATH.
func checkQemuImg(opts *Options, pm PackageManager) Result {
	r := Result{Name: "qemu-img"}
	path := opts.getenv("PATH")
	bin, ok := lookPath("qemu-img", path)
	if !ok {
		r.Status = Fail
		r.Detail = fmt.Sprintf("qemu-img not found in PATH (%s): building an image with provision steps flattens its disk with it", displayPath(path))
		if c, ok := pm.install("qemu-img"); ok {
			r.Fix = c
		} else {
			r.Fix = "install qemu-img (it comes with QEMU)"
		}
		return r
	}
	r.Status = OK
	r.Detail = bin + " found (provisioned images flatten their disks with it)"
	return r
}

// archs returns the guest architectures to check emulators for: the
// host's first, then the others cfg's images use, sorted.
func archs(cfg *lang.Config) []string {
	out := []string{runtime.GOARCH}
	if cfg == nil {
		return out
	}
	seen := map[string]bool{runtime.GOARCH: true}
	for _, name := range slices.Sorted(maps.Keys(cfg.Images)) {
		a := cfg.Images[name].Platform.Architecture
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	slices.Sort(out[1:])
	return out
}

// checkConfig reports whether the configuration loaded: a configuration
// with errors is checked for what could be read of it.
func checkConfig(opts *Options) Result {
	r := Result{Name: "config"}
	cfg := opts.Config
	if len(opts.ConfigErrors) > 0 {
		r.Status = Fail
		r.Detail = "the configuration in " + cfg.Dir + " has errors (" + opts.ConfigErrors[0] + "); only what could be read of it is checked"
		r.Fix = "sbx validate " + shellQuote(cfg.Dir)
		return r
	}
	var kinds []string
	for k := range sourceKinds(cfg) {
		kinds = append(kinds, string(k))
	}
	slices.Sort(kinds)
	r.Status = OK
	r.Detail = cfg.Dir + ": " + count(len(cfg.Images), "image") + ", " + count(len(cfg.Sandboxes), "sandbox")
	if len(kinds) > 0 {
		r.Detail += "; sources: " + strings.Join(kinds, ", ")
	}
	return r
}

// sources returns every source of cfg's images with the image's platform.
func sources(cfg *lang.Config) []platformSource {
	var out []platformSource
	for _, name := range slices.Sorted(maps.Keys(cfg.Images)) {
		img := cfg.Images[name]
		add := func(s *lang.Source) {
			if s != nil {
				out = append(out, platformSource{s, img.Platform})
			}
		}
		add(img.Base)
		if img.Kernel != nil {
			add(img.Kernel.Source)
		}
		for _, a := range img.Artifacts {
			add(a.Source)
		}
	}
	return out
}

// hostAptPackagesIn reports whether an image of cfg takes its package
// set from the host's apt sources (hostAptPackages).
func hostAptPackagesIn(cfg *lang.Config) bool {
	for _, img := range cfg.Images {
		if hostAptPackages(img) {
			return true
		}
	}
	return false
}

type platformSource struct {
	src      *lang.Source
	platform lang.Platform
}

func sourceKinds(cfg *lang.Config) map[lang.SourceKind]bool {
	kinds := map[lang.SourceKind]bool{}
	for _, s := range sources(cfg) {
		kinds[s.src.Kind] = true
	}
	return kinds
}

func count(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case strings.HasSuffix(noun, "x"):
		return strconv.Itoa(n) + " " + noun + "es"
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == '+' || r == '=' || r == ':' || r == ',' || r == '@' || r == '%' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// lookPath finds an executable in a PATH-style list; an empty list finds
// nothing.
func lookPath(name, path string) (string, bool) {
	for _, dir := range strings.Split(path, string(os.PathListSeparator)) {
		if dir == "" {
			continue
		}
		p := dir + string(os.PathSeparator) + name
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}
