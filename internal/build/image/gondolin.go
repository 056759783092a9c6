package image

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sbx-dev/sbx/internal/build/gondolin"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// ExportGondolin writes img as a Gondolin guest-asset directory at dir:
// vmlinuz-virt (the kernel), initramfs.cpio.lz4 (the initramfs in legacy
// LZ4 framing), rootfs.ext4 (the root filesystem as raw, writable ext4
// labelled gondolin-root) and manifest.json, whose buildTime is
// opts.Epoch so that the directory is reproducible.
//
// The kernel and initramfs are taken from the cached build when there is
// one (their digests checked); otherwise they are made here, and not
// stored in the cache. The directory is assembled in a temporary directory
// beside dir and renamed into place, so dir is never half-written: it
// holds the previous export or the whole new one (and, for a moment
// between two renames, nothing). An existing dir must be empty or hold a
// manifest.json; anything else is left alone and is an error.
func ExportGondolin(ctx context.Context, img *lang.Image, lock *lockfiles.Image, dir string, opts Options) (err error) {
	opts.Verify = false
	b, err := prepare(img, lock, opts)
	if err != nil {
		return err
	}
	dir = filepath.Clean(dir)
	if err := checkExportDir(dir); err != nil {
		return fmt.Errorf("image %q: %w", img.Name, err)
	}
	arch, err := gondolin.NormalizeArch(img.Platform.Architecture)
	if err != nil {
		return fmt.Errorf("image %q: platform %s: %w", img.Name, img.Platform, err)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	out, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-*")
	if err != nil {
		return fmt.Errorf("image %q: %w", img.Name, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(out)
		}
	}()
	stage, err := os.MkdirTemp(opts.TempDir, "sbx-export-*")
	if err != nil {
		return fmt.Errorf("image %q: staging directory: %w", img.Name, err)
	}
	defer os.RemoveAll(stage)

	fetched, err := b.fetch(ctx)
	if err != nil {
		return err
	}
	s := &staged{files: map[string]string{}, outputs: map[string]Output{}}
	if ref, ok := b.cached(ctx); ok {
		s.files[OutputKernel] = ref.Outputs[OutputKernel].Path
		s.files[OutputInitramfs] = ref.Outputs[OutputInitramfs].Path
	} else if err := b.kernelAndInitramfs(ctx, stage, fetched, s); err != nil {
		return err
	}
	if _, _, err := copyVerified(ctx, filepath.Join(out, gondolin.KernelFile), s.files[OutputKernel], 0o644); err != nil {
		return fmt.Errorf("image %q: %w", img.Name, err)
	}
	b.stage(StageLZ4)
	if err := writeFile(filepath.Join(out, gondolin.InitramfsFile), func(w *bufio.Writer) error {
		f, err := os.Open(s.files[OutputInitramfs])
		if err != nil {
			return err
		}
		defer f.Close()
		return gondolin.CompressLegacyLZ4(w, bufio.NewReaderSize(f, 1<<20))
	}); err != nil {
		return fmt.Errorf("image %q: %w", img.Name, err)
	}
	if err := b.rootDisk(ctx, stage, fetched, s, filepath.Join(out, gondolin.RootfsFile), gondolin.RootfsLabel, false); err != nil {
		return err
	}

	b.stage(StageStore)
	m, err := gondolin.NewManifest(out, gondolin.Config{
		Arch:   arch,
		Rootfs: &gondolin.RootfsConfig{Label: gondolin.RootfsLabel, SizeMb: s.diskSize >> 20},
	}, time.Unix(opts.Epoch, 0))
	if err != nil {
		return fmt.Errorf("image %q: %w", img.Name, err)
	}
	if err := gondolin.WriteManifest(out, m); err != nil {
		return fmt.Errorf("image %q: %w", img.Name, err)
	}
	if err := os.Chmod(out, 0o755); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return replaceDir(out, dir)
}

// checkExportDir accepts a dir that does not exist, is empty, or holds a
// manifest.json (an earlier export).
func checkExportDir(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, gondolin.ManifestFile)); err == nil {
		return nil
	}
	return fmt.Errorf("%s is not empty and holds no %s: it does not look like a Gondolin asset directory, so it is not replaced", dir, gondolin.ManifestFile)
}

// replaceDir moves the finished directory tmp to dir, replacing what is
// there.
func replaceDir(tmp, dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return os.Rename(tmp, dir)
	}
	old, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".old-*")
	if err != nil {
		return err
	}
	if err := os.Remove(old); err != nil {
		return err
	}
	if err := os.Rename(dir, old); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if rerr := os.Rename(old, dir); rerr != nil {
			return fmt.Errorf("%w; the previous export is at %s", err, old)
		}
		return err
	}
	return os.RemoveAll(old)
}
