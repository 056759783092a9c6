package rootfs

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sbx-dev/sbx/internal/build/debrepo"
	"github.com/sbx-dev/sbx/internal/build/ext4"
	"github.com/sbx-dev/sbx/internal/build/fetch"
	"github.com/sbx-dev/sbx/internal/build/layers"
	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/hostenv"
	"github.com/sbx-dev/sbx/internal/proto/imageinfo"
	"github.com/sbx-dev/sbx/internal/recipe"
	"github.com/sbx-dev/sbx/lang"
)

// Inputs are an image's fetched inputs by recipe key ("base",
// "artifact.NAME"), as fetch.Inputs returns them. The kernel's entry, if
// any, is not used here.
type Inputs map[string]fetch.Fetched

// Options tune Assemble.
type Options struct {
	// Hostname is written to /etc/hostname and /etc/hosts. Empty means
	// the image's name, lower-cased with every character a host name
	// cannot hold replaced by "-".
	Hostname string
	// InputHash is the image's recipe input hash, recorded in
	// /etc/sbx/image.json; empty leaves it out.
	InputHash string
	// TempDir holds the tree's spill file and scratch copies of OCI
	// artifacts; empty means the default temporary directory.
	TempDir string
	// Packages are the image's pinned packages, fetched and verified
	// (debrepo.Client.Download); an image with packages needs them.
	Packages []debrepo.Fetched
	// Apk, when set, are an Alpine image's pinned packages instead.
	Apk *ApkPackages
}

// Assemble builds img's root filesystem from its fetched inputs and returns
// it as a tree; the caller closes it. (*layers.Tree).WriteTar turns it into
// the canonical tar stream that builders/ext4 makes a disk of (BuildDisk
// does both).
//
// The steps, in order: the base image's layers are flattened (or, with no
// base, the tree starts empty); the standard directories the guest agent
// mounts on are created where missing; artifacts are placed, then user
// accounts created, then sbx's /etc files written (hostname, hosts,
// resolv.conf, environment, /etc/sbx/image.json), and file blocks last, so
// that a file block may replace any of those. Artifacts, users and files are
// applied in recipe.Canonical order, so that the recipe's input hash alone
// fixes the result. The package documentation gives the rules of each step.
//
// Errors name the spec block (file:line) and the input, archive entry or
// path concerned.
func Assemble(ctx context.Context, img *lang.Image, inputs Inputs, opts Options) (*layers.Tree, error) {
	if img == nil {
		return nil, errors.New("rootfs: no image")
	}
	img = recipe.Canonical(img)
	a := &assembler{img: img, inputs: inputs, opts: opts}
	hostname, err := a.hostname()
	if err != nil {
		return nil, err
	}

	t, baseEnv, err := a.base(ctx)
	if err != nil {
		return nil, err
	}
	a.tree = t
	ok := false
	defer func() {
		if !ok {
			t.Close()
		}
	}()

	if err := a.standardDirs(); err != nil {
		return nil, err
	}
	if err := a.packages(ctx); err != nil {
		return nil, err
	}
	homes := a.existingHomes()
	for _, art := range img.Artifacts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := a.artifact(ctx, art); err != nil {
			return nil, err
		}
	}
	users, err := a.accounts(homes)
	if err != nil {
		return nil, err
	}
	if err := a.executables(); err != nil {
		return nil, err
	}
	if err := a.etc(hostname, mergeEnv(baseEnv, img.Env), users); err != nil {
		return nil, err
	}
	for _, f := range img.Files {
		if err := a.file(f); err != nil {
			return nil, err
		}
	}
	if err := a.symlinks(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ok = true
	return t, nil
}

// BuildDisk writes tree as an ext4 image to path, with every modification
// time opts.Epoch. The image is written to a temporary file beside path and
// renamed into place, so that path is either the whole image or untouched:
// also when ctx ends, which stops the build at its next write (see
// ext4.Build) and returns ctx's error.
func BuildDisk(ctx context.Context, tree *layers.Tree, path string, opts ext4.Options) (ext4.Stats, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return ext4.Stats{}, err
	}
	tmp := f.Name()
	fail := func(err error) (ext4.Stats, error) {
		f.Close()
		os.Remove(tmp)
		return ext4.Stats{}, fmt.Errorf("building %s: %w", path, err)
	}
	pr, pw := io.Pipe()
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		pw.CloseWithError(tree.WriteTar(pw, opts.Epoch))
	}()
	stats, err := ext4.Build(ctx, f, pr, opts)
	// Close the reading end so that the tar writer's next write fails,
	// whatever Build did, and wait for it: nothing reads the tree once
	// BuildDisk has returned.
	pr.CloseWithError(errors.New("ext4 build ended"))
	<-wrote
	if err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return ext4.Stats{}, fmt.Errorf("building %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return ext4.Stats{}, err
	}
	return stats, nil
}

// assembler carries one Assemble call.
type assembler struct {
	img    *lang.Image
	inputs Inputs
	opts   Options
	tree   *layers.Tree
	// inventory and execs are the installed packages and checked
	// executables, for image.json.
	inventory []imageinfo.Package
	execs     []imageinfo.Executable
}

// DefaultMaxContent bounds the file content written while assembling an
// image that declares no size. An image that needs more declares its size.
const DefaultMaxContent = 64 << 30

// Entry limits: at most one entry per 4 KiB of the content limit (ext4
// gives a file system one inode per 16 KiB by default), but never fewer
// than minEntries nor more than maxEntries.
const (
	minEntries = 1 << 16
	maxEntries = 1 << 22
)

// sizeSlack is what ContentLimits allows beyond twice an image's size.
const sizeSlack = 64 << 20

// ContentLimits are the limits of the tree an image of the given declared
// size (0 for none) is assembled in, and of the scratch tree an OCI
// artifact is flattened in: file content written up to twice the size
// plus 64 MiB (DefaultMaxContent without a size), and one entry per 4 KiB
// of that, between 65,536 and 4,194,304. Content that merely does not fit
// the size gets to the file system builder, which says what size it needs;
// an archive that expands past the limits — a few kilobytes of compressed
// zeros, millions of empty entries — stops with an error naming it, long
// before it fills the disk or memory.
func ContentLimits(size int64) layers.Limits {
	bytes := int64(DefaultMaxContent)
	if size > 0 {
		bytes = 2*size + sizeSlack
	}
	return layers.Limits{Bytes: bytes, Entries: int(min(max(bytes/4096, minEntries), maxEntries))}
}

// newTree makes a tree with the image's ContentLimits.
func (a *assembler) newTree() (*layers.Tree, error) {
	t, err := layers.NewTree(a.opts.TempDir)
	if err != nil {
		return nil, err
	}
	t.SetLimits(ContentLimits(a.img.Size))
	return t, nil
}

// limitError explains a *layers.LimitError in err by the image's size, and
// returns other errors as they are.
func (a *assembler) limitError(err error) error {
	var le *layers.LimitError
	if !errors.As(err, &le) {
		return err
	}
	if a.img.Size > 0 {
		return fmt.Errorf("%w: it expands past %s, twice the image's size of %s plus %s; an archive is not unpacked beyond that (raise size if the content is meant to be that large)",
			err, lang.FormatSize(le.Limit), lang.FormatSize(a.img.Size), lang.FormatSize(sizeSlack))
	}
	return fmt.Errorf("%w: it expands past %s, the limit of an image that declares no size; an archive is not unpacked beyond it (declare the image's size if the content is meant to be that large)", err, lang.FormatSize(DefaultMaxContent))
}

// base returns the flattened base image (or a fresh tree) and the base
// image's configured environment.
func (a *assembler) base(ctx context.Context) (*layers.Tree, []string, error) {
	t, err := a.newTree()
	if err != nil {
		return nil, nil, err
	}
	if a.img.Base == nil {
		return t, nil, nil
	}
	what := fmt.Sprintf("image %q: base %s", a.img.Name, a.img.Base.Raw)
	in, ok := a.inputs["base"]
	if !ok {
		t.Close()
		return nil, nil, diags.WithSubject(fmt.Errorf("%s: not fetched", what), a.img.Base.Range)
	}
	if in.Manifest == nil {
		t.Close()
		return nil, nil, diags.WithSubject(fmt.Errorf("%s: fetched as %s, not as an OCI image", what, in.Kind), a.img.Base.Range)
	}
	for _, b := range in.Layers {
		if err := ctx.Err(); err != nil {
			t.Close()
			return nil, nil, err
		}
		l := layers.FileLayer(b.Path, b.MediaType)
		l.Name = b.Digest
		if err := t.Apply(l); err != nil {
			t.Close()
			return nil, nil, diags.WithSubject(fmt.Errorf("%s: %w", what, a.limitError(err)), a.img.Base.Range)
		}
	}
	var env []string
	if in.Config != nil {
		env, err = configEnv(in.Config.Path)
		if err != nil {
			t.Close()
			return nil, nil, diags.WithSubject(fmt.Errorf("%s: %w", what, err), a.img.Base.Range)
		}
	}
	return t, env, nil
}

// configEnv reads the environment from an OCI image config blob.
func configEnv(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg, err := v1.ParseConfigFile(f)
	if err != nil {
		return nil, fmt.Errorf("image config %s: %w", path, err)
	}
	return cfg.Config.Env, nil
}

// mergeEnv overlays the spec's environment on the base image's KEY=VALUE
// list. Entries of the base without "=" are dropped.
func mergeEnv(base []string, spec map[string]string) map[string]string {
	env := hostenv.Map(base)
	for k, v := range spec {
		env[k] = v
	}
	return env
}

// standardDirs are created where the tree has nothing: the guest agent
// mounts on /dev, /proc, /sys, /run and /tmp, and programs expect the rest.
var standardDirs = []struct {
	path string
	mode int64
}{
	{"/dev", 0o755},
	{"/etc", 0o755},
	{imageinfo.Dir, 0o755},
	{imageinfo.CertsDir, 0o755},
	{"/proc", 0o555},
	{"/root", 0o700},
	{"/run", 0o755},
	{"/sys", 0o555},
	{"/tmp", 0o1777},
	{"/var", 0o755},
	{"/var/tmp", 0o1777},
}

func (a *assembler) standardDirs() error {
	for _, d := range standardDirs {
		if _, ok := a.tree.Lookup(d.path); ok {
			continue
		}
		if err := a.checkParents(d.path); err != nil {
			return fmt.Errorf("image %q: %w", a.img.Name, err)
		}
		if err := a.tree.Add(layers.Entry{Path: d.path, Type: tar.TypeDir, Mode: d.mode}, nil); err != nil {
			return fmt.Errorf("image %q: %w", a.img.Name, err)
		}
	}
	return nil
}

// checkParents returns an error when a directory above p in the tree is not
// a directory: a symbolic link (never followed) or a file.
func (a *assembler) checkParents(p string) error {
	for i := 1; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		dir := p[:i]
		e, ok := a.tree.Lookup(dir)
		if !ok {
			return nil
		}
		switch e.Type {
		case tar.TypeDir:
		case tar.TypeSymlink:
			return fmt.Errorf("%s goes through %s, a symbolic link to %s; links in the image are never followed, so name the path the link points at", p, dir, e.Linkname)
		default:
			return fmt.Errorf("%s goes through %s, which is a %s, not a directory", p, dir, layers.TypeName(e.Type))
		}
	}
	return nil
}
