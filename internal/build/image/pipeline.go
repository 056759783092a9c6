package image

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/proto/imageinfo"
	"os"
	"path/filepath"
	"slices"

	"github.com/sbx-dev/sbx/internal/build/ext4"
	"github.com/sbx-dev/sbx/internal/build/fetch"
	"github.com/sbx-dev/sbx/internal/build/initramfs"
	"github.com/sbx-dev/sbx/internal/build/kernel"
	"github.com/sbx-dev/sbx/internal/build/layers"
	"github.com/sbx-dev/sbx/internal/build/rootfs"
	"github.com/sbx-dev/sbx/internal/qcow2"
)

// staged are the outputs of one run, in a staging directory.
type staged struct {
	// files are the outputs' paths, by output name.
	files map[string]string
	// outputs are their digests and sizes (Path is left empty).
	outputs       map[string]Output
	kernelVersion string
	diskSize      int64
	// kernelFresh says the kernel and initramfs were made by this run,
	// not taken from the cache.
	kernelFresh bool
	// packages and executables are the image's inventory.
	packages    []imageinfo.Package
	executables []imageinfo.Executable
}

// run builds every output into dir.
func (b *build) run(ctx context.Context, dir string) (*staged, error) {
	fetched, err := b.fetch(ctx)
	if err != nil {
		return nil, err
	}
	pkgs, err := b.fetchPackages(ctx)
	if err != nil {
		return nil, err
	}
	b.packages = pkgs
	s := &staged{files: map[string]string{}, outputs: map[string]Output{}}
	// The root disk first: mistakes in the spec's artifacts, users and
	// files show up without waiting for the kernel.
	disk := filepath.Join(dir, outputFiles[OutputDisk])
	if err := b.rootDisk(ctx, dir, fetched, s, disk, DiskLabel, true); err != nil {
		return nil, err
	}
	s.files[OutputDisk] = disk
	if err := b.kernelAndInitramfs(ctx, dir, fetched, s); err != nil {
		return nil, err
	}
	agent := filepath.Join(dir, outputFiles[OutputAgent])
	if err := os.WriteFile(agent, b.agent, 0o755); err != nil {
		return nil, fmt.Errorf("image %q: staging the guest agent: %w", b.img.Name, err)
	}
	s.files[OutputAgent] = agent
	for _, name := range outputOrder {
		digest, n, err := hashFile(ctx, s.files[name])
		if err != nil {
			return nil, fmt.Errorf("image %q: output %s: %w", b.img.Name, name, err)
		}
		s.outputs[name] = Output{Digest: digest, Size: n}
	}
	if s.outputs[OutputAgent].Digest != b.agentSum {
		return nil, fmt.Errorf("image %q: the guest agent %s changed during the build", b.img.Name, b.agentPath)
	}
	return s, nil
}

// fetch brings every input into the cache. In verify mode every blob the
// build reads is hashed again, so that a cache corrupted on disk cannot
// make two builds agree.
func (b *build) fetch(ctx context.Context) (map[string]fetch.Fetched, error) {
	b.stage(StageFetch)
	fetched, err := fetch.Inputs(ctx, b.img, b.lock, b.cache, b.opts.Fetch)
	if err != nil {
		return nil, err
	}
	if !b.opts.Verify {
		return fetched, nil
	}
	for _, key := range sortedKeys(fetched) {
		f := fetched[key]
		blobs := slices.Clone(f.Layers)
		for _, p := range []*fetch.Blob{f.File, f.Manifest, f.Config} {
			if p != nil {
				blobs = append(blobs, *p)
			}
		}
		for _, blob := range blobs {
			if err := b.cache.Verify(ctx, blob.Digest); err != nil {
				return nil, fmt.Errorf("image %q: input %s: cached blob %s: %w", b.img.Name, key, blob.Digest, err)
			}
		}
	}
	return fetched, nil
}

// kernelAndInitramfs takes the kernel and initramfs from the cache or
// else loads the kernel and writes its image and the initramfs (agent and
// module closure) into dir. Verify mode always makes them afresh. Each
// step stops once ctx ends.
func (b *build) kernelAndInitramfs(ctx context.Context, dir string, fetched map[string]fetch.Fetched, s *staged) error {
	if !b.opts.Verify && b.cachedKernel(ctx, s) {
		return nil
	}
	s.kernelFresh = true
	b.stage(StageKernel)
	kc := b.img.Kernel
	what := fmt.Sprintf("image %q: kernel %s", b.img.Name, kc.Source.Raw)
	in, ok := fetched["kernel"]
	if !ok || in.File == nil {
		return diags.WithSubject(fmt.Errorf("%s: not fetched as a file (kernels come as .deb, .apk or tar packages)", what), kc.DeclRange)
	}
	load := b.opts.LoadKernel
	if load == nil {
		load = func(ctx context.Context, blob fetch.Blob, opts kernel.Options) (*kernel.Kernel, error) {
			return kernel.Load(ctx, blob.Path, opts)
		}
	}
	k, err := load(ctx, *in.File, kernel.Options{Image: kc.File, Modules: kc.Modules})
	if err != nil {
		return diags.WithSubject(fmt.Errorf("%s: %w", what, err), kc.DeclRange)
	}
	names := append(slices.Clone(kernel.DefaultModules), kc.Modules...)
	mods, err := initramfs.KernelModules(ctx, k, names)
	if err != nil {
		return diags.WithSubject(fmt.Errorf("%s: modules: %w", what, err), kc.DeclRange)
	}
	s.kernelVersion = k.Version
	vmlinuz := filepath.Join(dir, outputFiles[OutputKernel])
	if err := os.WriteFile(vmlinuz, k.Image, 0o644); err != nil {
		return fmt.Errorf("image %q: staging the kernel: %w", b.img.Name, err)
	}
	s.files[OutputKernel] = vmlinuz

	b.stage(StageInitramfs)
	initrd := filepath.Join(dir, outputFiles[OutputInitramfs])
	if err := writeFile(initrd, func(w *bufio.Writer) error {
		return initramfs.Write(ctx, w, initramfs.Options{Agent: b.agent, KernelVersion: k.Version, Modules: mods, Epoch: b.opts.Epoch})
	}); err != nil {
		return fmt.Errorf("image %q: %w", b.img.Name, err)
	}
	s.files[OutputInitramfs] = initrd
	return nil
}

// writeFile creates path and writes it through a buffer.
func writeFile(path string, write func(w *bufio.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := write(w); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// rootDisk assembles the root filesystem and writes it to path as ext4
// with the given label, converted to qcow2 when toQcow2 is set. dir holds
// scratch files.
func (b *build) rootDisk(ctx context.Context, dir string, fetched map[string]fetch.Fetched, s *staged, path, label string, toQcow2 bool) error {
	b.stage(StageRootfs)
	apk, err := b.apkPackages()
	if err != nil {
		return err
	}
	tree, err := rootfs.Assemble(ctx, b.img, rootfs.Inputs(fetched), rootfs.Options{InputHash: b.lock.InputHash, TempDir: dir, Packages: b.packages, Apk: apk})
	if err != nil {
		return err
	}
	defer tree.Close()
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.packages, s.executables, err = inventory(tree); err != nil {
		return fmt.Errorf("image %q: %w", b.img.Name, err)
	}

	b.stage(StageExt4)
	raw := path
	if toQcow2 {
		raw = filepath.Join(dir, "disk.ext4")
	}
	size, err := b.writeExt4(ctx, tree, raw, label)
	if err != nil {
		return err
	}
	s.diskSize = size
	if err := ctx.Err(); err != nil {
		return err
	}
	if !toQcow2 {
		return nil
	}
	b.stage(StageQcow2)
	if err := qcow2.ConvertFile(ctx, path, raw, qcow2.Options{}); err != nil {
		return fmt.Errorf("image %q: qcow2: %w", b.img.Name, err)
	}
	if err := os.Remove(raw); err != nil {
		return fmt.Errorf("image %q: %w", b.img.Name, err)
	}
	return nil
}

// writeExt4 writes tree to path as an ext4 image of the declared size, or
// of the default size (see DefaultSize), and returns the size.
func (b *build) writeExt4(ctx context.Context, tree *layers.Tree, path, label string) (int64, error) {
	declared := b.img.Size > 0
	size := roundUp(b.img.Size, blockSize)
	if !declared {
		size = DefaultSize(ContentSize(tree))
	}
	opts := func(size int64) ext4.Options {
		return ext4.Options{
			Size:          size,
			Label:         label,
			Seed:          []byte(b.lock.InputHash),
			Epoch:         b.opts.Epoch,
			JournalBlocks: JournalBlocks(size),
		}
	}
	_, err := rootfs.BuildDisk(ctx, tree, path, opts(size))
	var fe *ext4.FitError
	if errors.As(err, &fe) && !declared && fe.MinSize > 0 {
		// The estimate fell short (many small files, say): give the
		// default headroom above what the tree needs.
		size = DefaultSize(fe.MinSize)
		_, err = rootfs.BuildDisk(ctx, tree, path, opts(size))
	}
	if errors.As(err, &fe) {
		if !declared {
			return 0, diags.WithSubject(fmt.Errorf("image %q: the root filesystem does not fit in %s: %w", b.img.Name, formatSize(size), err), b.img.DeclRange)
		}
		if fe.MinSize == 0 {
			return 0, diags.WithSubject(fmt.Errorf("image %q: the root filesystem does not fit in the declared size %s (%d bytes), nor in any size up to 16 TiB: %w",
				b.img.Name, formatSize(b.img.Size), b.img.Size, err), b.img.DeclRange)
		}
		min := minimumSize(fe.MinSize, size)
		return 0, diags.WithSubject(fmt.Errorf("image %q: the root filesystem does not fit in the declared size %s (%d bytes): it needs at least %s (%d bytes); raise the image's size",
			b.img.Name, formatSize(b.img.Size), b.img.Size, formatSize(min), min), b.img.DeclRange)
	}
	if err != nil {
		return 0, fmt.Errorf("image %q: %w", b.img.Name, err)
	}
	return size, nil
}

const (
	blockSize = 4096
	mib       = 1 << 20
	// minHeadroom is the least free space the default size leaves.
	minHeadroom = 512 * mib
)

// ContentSize estimates the bytes the tree takes in ext4: every regular
// file rounded up to whole blocks, a block per directory and per symbolic
// link too long for its inode, and an inode for every path.
func ContentSize(t *layers.Tree) int64 {
	var n int64
	for _, p := range t.Paths() {
		e, ok := t.Lookup(p)
		if !ok {
			continue
		}
		n += 256
		switch e.Type {
		case tar.TypeReg:
			n += roundUp(e.Size, blockSize)
		case tar.TypeDir:
			n += blockSize
		case tar.TypeSymlink:
			if len(e.Linkname) >= 60 {
				n += blockSize
			}
		}
		for k, v := range e.Xattrs {
			n += int64(len(k) + len(v))
		}
	}
	return n
}

// DefaultSize is the root filesystem size of an image that declares none:
// its content plus half as much again, at least 512 MiB more, rounded up
// to a multiple of 64 MiB. The free space costs nothing in the qcow2 disk,
// which stores only what is written.
func DefaultSize(content int64) int64 {
	return roundUp(content+max(content/2, minHeadroom), 64*mib)
}

// JournalBlocks is the size of the ext4 journal, in 4 KiB blocks, for a
// file system of size bytes; it follows mke2fs's defaults. File systems
// under 16 MiB have none.
func JournalBlocks(size int64) uint32 {
	blocks := size / blockSize
	switch {
	case blocks < 4096:
		return 0
	case blocks < 32768:
		return 1024
	case blocks < 262144:
		return 4096
	case blocks < 524288:
		return 8192
	case blocks < 4194304:
		return 16384
	}
	return 32768
}

// minimumSize turns ext4's minimum for one journal size into a size that
// holds the tree with the journal that size itself gets.
func minimumSize(fit, tried int64) int64 {
	min := roundUp(fit, mib)
	for range 3 {
		extra := (int64(JournalBlocks(min)) - int64(JournalBlocks(tried))) * blockSize
		if extra <= 0 {
			break
		}
		next := roundUp(fit+extra, mib)
		if next == min {
			break
		}
		min = next
	}
	return min
}

func roundUp(n, to int64) int64 {
	return (n + to - 1) / to * to
}

// formatSize renders a byte count the way specs write sizes.
func formatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= mib && n%mib == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= mib:
		return fmt.Sprintf("%.1fMiB", float64(n)/mib)
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

// inventory reads the image's inventory from the description the
// assembled tree carries for the guest.
func inventory(tree *layers.Tree) ([]imageinfo.Package, []imageinfo.Executable, error) {
	r, err := tree.Open(imageinfo.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", imageinfo.Path, err)
	}
	var info imageinfo.Info
	if err := json.NewDecoder(r).Decode(&info); err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", imageinfo.Path, err)
	}
	return info.Packages, info.Executables, nil
}
