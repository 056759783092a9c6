package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/sbx-dev/sbx/internal/build/agentbin"
	"github.com/sbx-dev/sbx/internal/build/apkrepo"
	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/debrepo"
	"github.com/sbx-dev/sbx/internal/build/digest"
	"github.com/sbx-dev/sbx/internal/build/fetch"
	"github.com/sbx-dev/sbx/internal/build/kernel"
	"github.com/sbx-dev/sbx/internal/build/localsrc"
	"github.com/sbx-dev/sbx/internal/ctxio"
	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/proto/imageinfo"
	"github.com/sbx-dev/sbx/internal/recipe"
	"github.com/sbx-dev/sbx/lang"
)

// FormatVersion is the version of what this builder writes for a given
// recipe: the layout of the initramfs and disk, the ext4 options, the
// default size rule. It is part of the build key, so changing any of them
// (and bumping it) makes every cached build miss. Version 2: extracted
// artifacts lose setuid and setgid bits, devices and file capabilities
// unless keep_special is set. Version 3: the image's network description
// and resolv.conf name the sandbox network's addresses (10.83.0.0/24).
const FormatVersion = 3

// Output names: the keys of Result.Outputs and of lockfiles.Image.Outputs.
const (
	// OutputKernel is the kernel image, as the kernel package ships it.
	OutputKernel = "kernel"
	// OutputInitramfs is the uncompressed newc initramfs: the agent as
	// /init and the kernel modules it loads.
	OutputInitramfs = "initramfs"
	// OutputDisk is the root disk, ext4 inside qcow2.
	OutputDisk = "disk"
	// OutputAgent is the guest agent binary the initramfs holds.
	OutputAgent = "agent"
)

// LockedOutputs are the outputs whose digests the lock file records. The
// agent is not among them: the initramfs holds it.
var LockedOutputs = []string{OutputKernel, OutputInitramfs, OutputDisk}

// outputFiles are the file names of the outputs in a build's directory.
var outputFiles = map[string]string{
	OutputKernel:    "vmlinuz",
	OutputInitramfs: "initramfs.cpio",
	OutputDisk:      "disk.qcow2",
	OutputAgent:     "sbx-guest",
}

// outputOrder is the order outputs are stored and listed in.
var outputOrder = []string{OutputKernel, OutputInitramfs, OutputDisk, OutputAgent}

// DiskLabel is the ext4 volume label of the root disk. The guest mounts
// the disk by device (/dev/vda), so the label only helps people.
const DiskLabel = "sbx-root"

// Stage is a step of a build, reported through Options.Stage.
type Stage string

// Stages, in the order a build runs them.
const (
	StageCached    Stage = "cached"            // the outputs were found in the cache
	StageFetch     Stage = "fetching"          // inputs into the cache
	StageKernel    Stage = "loading kernel"    // the kernel and its modules
	StageInitramfs Stage = "initramfs"         // writing the initramfs
	StageRootfs    Stage = "assembling rootfs" // base, artifacts, users, files
	StageExt4      Stage = "writing ext4"      // the file system image
	StageQcow2     Stage = "qcow2"             // converting the disk
	StageLZ4       Stage = "lz4"               // compressing the initramfs (Gondolin)
	StageStore     Stage = "storing"           // outputs into the cache or directory
	StageVerify    Stage = "verifying"         // rebuilding from scratch to compare
)

// Options configure Build and ExportGondolin. The zero value builds with
// the default cache, the agent found by agentbin.Find and epoch 0.
type Options struct {
	// Cache holds inputs and outputs; nil means cache.Open("") (the
	// default root, $SBX_CACHE_DIR if set).
	Cache *cache.Cache
	// Fetch configures fetching inputs: the configuration directory,
	// clients, npm and apt configuration, download progress.
	Fetch fetch.Options
	// Agent returns the path of the guest agent binary for a platform;
	// nil means agentbin.Find.
	Agent func(lang.Platform) (string, error)
	// LoadKernel reads the kernel package fetched as blob; nil means
	// kernel.Load(ctx, blob.Path, opts). Callers that build many images from
	// one kernel may remember kernels by blob.Digest.
	LoadKernel func(ctx context.Context, blob fetch.Blob, opts kernel.Options) (*kernel.Kernel, error)
	// Epoch is every timestamp in the outputs, in seconds since 1970.
	// The command line passes SOURCE_DATE_EPOCH, or 0 when it is unset,
	// so that builds are reproducible by default. It is part of the
	// build key.
	Epoch int64
	// Verify rebuilds from scratch in a temporary directory, ignoring
	// cached outputs (inputs still come from the cache, checked against
	// their digests), and compares every output with the cached build
	// (made first if there is none) and with the lock's recorded hashes.
	Verify bool
	// TempDir is where builds stage their files; empty means the
	// default temporary directory. A build needs about the root
	// filesystem's content size twice over there.
	TempDir string
	// Stage, if set, is called as each stage starts.
	Stage func(Stage)
	// AptRoot is the root of the apt configuration that images with
	// packages but no repositories fetch them from; "" means "/".
	AptRoot string
	// DebRepo is the template of the client packages are fetched with
	// (its cache is the build's); nil means one with Fetch.HTTPClient.
	DebRepo *debrepo.Client
	// ApkRepo is the template of the client Alpine packages are fetched
	// with (its cache, keys and architecture are the build's); nil means
	// one with Fetch.HTTPClient.
	ApkRepo *apkrepo.Client
	// Provision runs the provision steps of images that have them;
	// building such an image without one is an error.
	Provision Provisioner
	// ProvisionStep, if set, is called as each provision step starts.
	ProvisionStep func(name string)
}

// Output is one built file.
type Output struct {
	// Path is the file's path, in the cache or an export directory.
	Path string
	// Digest is "sha256:<hex>" of its bytes.
	Digest string
	Size   int64
}

// Result describes a build.
type Result struct {
	// Image is the image block's name.
	Image string
	// InputHash is the recipe input hash the lock records.
	InputHash string
	// BuildKey is "sha256:<hex>" over the input hash, the agent's
	// digest, the epoch and FormatVersion; the cache keeps the outputs
	// under it.
	BuildKey string
	// ProvisionHash is the image's provision steps' hash
	// (recipe.ProvisionHash), and BaseKey the build key of the disk they
	// started from; both are empty for an image without steps. A
	// provisioned build's BuildKey covers both, and its disk output is
	// the provisioned disk.
	ProvisionHash string
	BaseKey       string
	// Cached is true when the outputs were already in the cache and
	// nothing was fetched or built.
	Cached bool
	// Outputs are keyed by OutputKernel, OutputInitramfs, OutputDisk and
	// OutputAgent.
	Outputs map[string]Output
	// Manifest is the path of image.json, which describes the build.
	Manifest string
	// KernelVersion is the kernel release ("6.1.0-57-amd64").
	KernelVersion string
	// DiskSize is the root filesystem's size in bytes, the disk's
	// virtual size.
	DiskSize int64
	// Packages and Executables are the image's inventory (see
	// Manifest).
	Packages    []imageinfo.Package
	Executables []imageinfo.Executable
}

// Digests returns the "sha256:<hex>" of each output in LockedOutputs, as
// the lock records them.
func (r *Result) Digests() map[string]string {
	m := make(map[string]string, len(LockedOutputs))
	for _, name := range LockedOutputs {
		if o, ok := r.Outputs[name]; ok {
			m[name] = o.Digest
		}
	}
	return m
}

// Build builds img as lock pins it, or finds the build in the cache.
//
// The lock must be up to date (recipe.CheckImageLocked) and the image must
// name a kernel. Outputs land in the cache under Result.BuildKey, all of
// them or none. With opts.Verify, see Options.Verify; differences are
// returned as a *VerifyError together with the cached build's Result.
//
// Errors name the image and, where one is at fault, the input, spec block
// (file:line) or output.
func Build(ctx context.Context, img *lang.Image, lock *lockfiles.Image, opts Options) (*Result, error) {
	b, err := prepare(img, lock, opts)
	if err != nil {
		return nil, err
	}
	if opts.Verify {
		return b.verify(ctx)
	}
	if b.provHash != "" {
		if r, ok := b.cachedAt(ctx, b.provKey); ok {
			if err := b.checkLocalFiles(ctx); err != nil {
				return nil, err
			}
			b.stage(StageCached)
			return r, nil
		}
	}
	base, err := b.base(ctx)
	if err != nil || b.provHash == "" {
		return base, err
	}
	return b.provisioned(ctx, base)
}

// base returns the image's build without its provision steps, from the
// cache or built and stored.
func (b *build) base(ctx context.Context) (*Result, error) {
	if r, ok := b.cached(ctx); ok {
		// Fetching would read local files again; a cache hit must not
		// hide one that changed since the lock either.
		if err := b.checkLocalFiles(ctx); err != nil {
			return nil, err
		}
		b.stage(StageCached)
		return r, nil
	}
	return b.buildAndStore(ctx)
}

// checkLocalFiles reports a file: input whose content is no longer the
// one the lock pins.
func (b *build) checkLocalFiles(ctx context.Context) error {
	for _, in := range recipe.Inputs(b.img) {
		if in.Source.Kind != lang.SourceFile {
			continue
		}
		pin := b.lock.Inputs[in.Key]
		if pin == nil {
			return fmt.Errorf("image %q: input %s is not locked; run \"sbx lock\"", b.img.Name, in.Key)
		}
		sum, err := cache.ParseDigest(pin.SHA256)
		if err != nil {
			return fmt.Errorf("image %q: input %s: the lock's sha256: %w", b.img.Name, in.Key, err)
		}
		// Opened inside the directory the source is confined to, as
		// fetching does: a symbolic link out of it is refused.
		f, path, err := localsrc.OpenFile(b.opts.Fetch.Dir, in.Source)
		if err != nil {
			return fmt.Errorf("image %q: input %s (%s): %w", b.img.Name, in.Key, in.Source.Raw, err)
		}
		hx, _, err := digest.Reader(ctx, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("image %q: input %s (%s): %s: %w", b.img.Name, in.Key, in.Source.Raw, path, err)
		}
		got := "sha256:" + hx
		if want := "sha256:" + sum; got != want {
			return fmt.Errorf("image %q: input %s (%s): %s changed since it was locked: want %s, got %s; run \"sbx lock\"",
				b.img.Name, in.Key, in.Source.Raw, path, want, got)
		}
	}
	return nil
}

// build is one Build or ExportGondolin call.
type build struct {
	img       *lang.Image
	lock      *lockfiles.Image
	opts      Options
	cache     *cache.Cache
	agentPath string
	agent     []byte
	agentSum  string
	key       string
	// provHash is recipe.ProvisionHash of the image, provKey the key of
	// its provisioned build; both are empty without provision steps.
	provHash string
	provKey  string
	// packages are the image's fetched packages, once fetched.
	packages []debrepo.Fetched
}

// prepare checks what a build needs before anything is fetched and
// computes the build key.
func prepare(img *lang.Image, lock *lockfiles.Image, opts Options) (*build, error) {
	if img == nil {
		return nil, errors.New("image: no image to build")
	}
	if img.Kernel == nil || img.Kernel.Source == nil {
		return nil, diags.WithSubject(fmt.Errorf("image %q has no kernel source: a bootable image needs a kernel block such as\n"+
			"\tkernel {\n\t  source = \"deb:linux-image-amd64\"\n\t  file   = \"boot/vmlinuz-*\"\n\t}",
			img.Name), img.DeclRange)
	}
	if lock == nil {
		return nil, fmt.Errorf("image %q is not in the lock file; run \"sbx lock\"", img.Name)
	}
	if err := recipe.CheckImageLocked(img, lock); err != nil {
		return nil, err
	}
	c := opts.Cache
	if c == nil {
		var err error
		if c, err = cache.Open(""); err != nil {
			return nil, err
		}
	}
	find := opts.Agent
	if find == nil {
		find = agentbin.Find
	}
	agentPath, err := find(img.Platform)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", img.Name, err)
	}
	if err := agentbin.Check(agentPath, img.Platform); err != nil {
		return nil, fmt.Errorf("image %q: guest agent: %w", img.Name, err)
	}
	agent, err := os.ReadFile(agentPath)
	if err != nil {
		return nil, fmt.Errorf("image %q: guest agent: %w", img.Name, err)
	}
	sum := sha256.Sum256(agent)
	b := &build{
		img: img, lock: lock, opts: opts, cache: c,
		agentPath: agentPath, agent: agent, agentSum: "sha256:" + hex.EncodeToString(sum[:]),
	}
	b.key = buildKey(lock.InputHash, b.agentSum, opts.Epoch)
	if b.provHash = recipe.ProvisionHash(img); b.provHash != "" {
		b.provKey = provisionKey(b.key, b.provHash)
	}
	return b, nil
}

// buildKey is the sha256 over everything that decides the output bytes.
func buildKey(inputHash, agentDigest string, epoch int64) string {
	h := sha256.New()
	fmt.Fprintf(h, "sbx image build\nformat %d\ninput %s\nagent %s\nepoch %d\n", FormatVersion, inputHash, agentDigest, epoch)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func (b *build) stage(s Stage) {
	if b.opts.Stage != nil {
		b.opts.Stage(s)
	}
}

// cached returns the build stored under b.key when its manifest and every
// output are present and hash to the digests the manifest records.
func (b *build) cached(ctx context.Context) (*Result, bool) { return b.cachedAt(ctx, b.key) }

// cachedAt is cached for the build stored under key (b.key, or
// b.provKey for the provisioned build).
func (b *build) cachedAt(ctx context.Context, key string) (*Result, bool) {
	mpath, ok, err := b.cache.OutputPath(key, ManifestFile)
	if err != nil || !ok {
		return nil, false
	}
	m, err := readManifest(mpath)
	if err != nil || m.BuildKey != key || m.InputHash != b.lock.InputHash {
		return nil, false
	}
	r := m.result(mpath)
	r.Cached = true
	for _, name := range outputOrder {
		want, ok := m.Outputs[name]
		if !ok || want.File != outputFiles[name] {
			return nil, false
		}
		p, ok, err := b.cache.OutputPath(key, want.File)
		if err != nil || !ok {
			return nil, false
		}
		got, n, err := hashFile(ctx, p)
		if err != nil || got != want.Digest || n != want.Size {
			return nil, false
		}
		r.Outputs[name] = Output{Path: p, Digest: got, Size: n}
	}
	return r, true
}

// buildAndStore builds into a staging directory and moves the outputs
// into the cache.
func (b *build) buildAndStore(ctx context.Context) (*Result, error) {
	stage, err := os.MkdirTemp(b.opts.TempDir, "sbx-build-*")
	if err != nil {
		return nil, fmt.Errorf("image %q: staging directory: %w", b.img.Name, err)
	}
	defer os.RemoveAll(stage)
	s, err := b.run(ctx, stage)
	if err != nil {
		return nil, err
	}
	return b.store(ctx, s)
}

// store puts the staged outputs into the cache, the manifest last. If any
// put fails, the outputs already stored under the key are removed again.
func (b *build) store(ctx context.Context, s *staged) (r *Result, err error) {
	b.stage(StageStore)
	var stored []string
	defer func() {
		if err == nil {
			return
		}
		for _, p := range stored {
			os.Remove(p)
		}
		// PutOutput made the key directories; remove them if empty.
		for _, key := range []string{b.key, b.kernelKey()} {
			if p, _, perr := b.cache.OutputPath(key, ManifestFile); perr == nil {
				os.Remove(filepath.Dir(p))
			}
		}
	}()
	m := s.manifest(b)
	if s.kernelFresh {
		paths, err := b.storeKernel(ctx, s)
		stored = append(stored, paths...)
		if err != nil {
			return nil, err
		}
	}
	main := len(stored)
	for _, name := range outputOrder {
		src := s.files[name]
		p, digest, err := b.cache.PutOutput(ctx, b.key, outputFiles[name], copyFrom(src))
		if err != nil {
			return nil, fmt.Errorf("image %q: storing output %s: %w", b.img.Name, name, err)
		}
		stored = append(stored, p)
		if want := m.Outputs[name].Digest; digest != want {
			return nil, fmt.Errorf("image %q: output %s changed while it was stored: %s, then %s", b.img.Name, name, want, digest)
		}
	}
	data, err := m.marshal()
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", b.img.Name, err)
	}
	mpath, _, err := b.cache.PutOutput(ctx, b.key, ManifestFile, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("image %q: storing %s: %w", b.img.Name, ManifestFile, err)
	}
	r = m.result(mpath)
	for i, name := range outputOrder {
		o := m.Outputs[name]
		r.Outputs[name] = Output{Path: stored[main+i], Digest: o.Digest, Size: o.Size}
	}
	return r, nil
}

// copyFrom returns a PutOutput writer copying the file at path.
func copyFrom(path string) func(io.Writer) error {
	return func(w io.Writer) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	}
}

// hashFile returns "sha256:<hex>" of the file at path, the form outputs
// are recorded in, and its size.
func hashFile(ctx context.Context, path string) (string, int64, error) {
	hx, n, err := digest.File(ctx, path)
	return "sha256:" + hx, n, err
}

// copyHashed copies the file at path to w and returns "sha256:<hex>" of
// its bytes and their count. It stops with ctx's error once ctx ends.
func copyHashed(ctx context.Context, w io.Writer, path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), ctxio.Reader(ctx, f))
	if err != nil {
		return "", 0, fmt.Errorf("copying %s: %w", path, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), n, nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
