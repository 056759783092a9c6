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

	"github.com/sbx-dev/sbx/lang"
)

// StageProvision is running an image's provision steps in a machine of
// its built disk.
const StageProvision Stage = "provisioning"

// Provisioner runs an image's provision steps (lang.Provision) on its
// built disk. Package provision implements it with a sandbox; the
// builder itself starts no machine.
type Provisioner interface {
	// Provision boots a machine of req.Base, runs req.Image's steps in
	// it in order and writes the resulting root disk to req.Disk: a
	// qcow2 image that needs no backing file. A step that fails or
	// times out is an error naming it; then req.Disk is not written.
	Provision(ctx context.Context, req ProvisionRequest) error
}

// ProvisionRequest is one run of an image's provision steps.
type ProvisionRequest struct {
	// Image is the image whose Provision steps run.
	Image *lang.Image
	// Base is the build the steps start from (the image without them),
	// and Platform and Cmdline are its manifest's.
	Base     *Result
	Platform string
	Cmdline  string
	// Disk is where the provisioned disk is written.
	Disk string
	// Step, if set, is called as each step starts.
	Step func(name string)
}

// ProvisionError is a provision step that failed.
type ProvisionError struct {
	Image string
	Step  string
	// ExitCode is the step's exit status; -1 when it did not exit (it
	// timed out or its machine failed).
	ExitCode int
	// TimedOut says the step ran longer than its timeout.
	TimedOut bool
	// Output is the end of what the step wrote to its stdout and
	// stderr.
	Output string
	Err    error
}

func (e *ProvisionError) Error() string {
	what := fmt.Sprintf("exited with status %d", e.ExitCode)
	switch {
	case e.TimedOut:
		what = "timed out"
	case e.Err != nil:
		what = e.Err.Error()
	}
	s := fmt.Sprintf("image %q: provision step %q %s", e.Image, e.Step, what)
	if e.Output != "" {
		s += "; its output ended with:\n" + e.Output
	}
	return s
}

func (e *ProvisionError) Unwrap() error { return e.Err }

// provisionKey is the cache key of a provisioned build: the base build's
// key and the steps' hash. The base keeps its own key, so a changed step
// runs again on the cached base.
func provisionKey(baseKey, provisionHash string) string {
	h := sha256.New()
	fmt.Fprintf(h, "sbx image provision\nbase %s\nprovision %s\n", baseKey, provisionHash)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// provisioned returns the provisioned build of base, from the cache or
// by running the steps and storing the result under b.provKey.
func (b *build) provisioned(ctx context.Context, base *Result) (*Result, error) {
	if r, ok := b.cachedAt(ctx, b.provKey); ok {
		return r, nil
	}
	dir, err := os.MkdirTemp(b.opts.TempDir, "sbx-provision-*")
	if err != nil {
		return nil, fmt.Errorf("image %q: staging directory: %w", b.img.Name, err)
	}
	defer os.RemoveAll(dir)
	disk, err := b.runProvision(ctx, base, dir)
	if err != nil {
		return nil, err
	}
	return b.storeProvisioned(ctx, base, disk)
}

// runProvision runs the steps on base and returns the provisioned disk's
// path in dir.
func (b *build) runProvision(ctx context.Context, base *Result, dir string) (string, error) {
	if b.opts.Provision == nil {
		return "", fmt.Errorf("image %q has provision steps, and this build cannot run them (no provisioner)", b.img.Name)
	}
	b.stage(StageProvision)
	disk := filepath.Join(dir, outputFiles[OutputDisk])
	err := b.opts.Provision.Provision(ctx, ProvisionRequest{
		Image:    b.img,
		Base:     base,
		Platform: b.img.Platform.String(),
		Cmdline:  b.img.Kernel.Cmdline,
		Disk:     disk,
		Step:     b.opts.ProvisionStep,
	})
	if err != nil {
		var perr *ProvisionError
		if errors.As(err, &perr) || ctx.Err() != nil {
			return "", err
		}
		return "", fmt.Errorf("image %q: provisioning: %w", b.img.Name, err)
	}
	if _, err := os.Stat(disk); err != nil {
		return "", fmt.Errorf("image %q: provisioning wrote no disk: %w", b.img.Name, err)
	}
	return disk, nil
}

// storeProvisioned stores base's kernel, initramfs and agent with the
// provisioned disk under b.provKey, the manifest last.
func (b *build) storeProvisioned(ctx context.Context, base *Result, disk string) (r *Result, err error) {
	b.stage(StageStore)
	mpath, ok, err := b.cache.OutputPath(base.BuildKey, ManifestFile)
	if err != nil || !ok {
		return nil, fmt.Errorf("image %q: the base build's manifest is not in the cache", b.img.Name)
	}
	m, err := readManifest(mpath)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", b.img.Name, err)
	}
	var stored []string
	defer func() {
		if err == nil {
			return
		}
		for _, p := range stored {
			os.Remove(p)
		}
		if p, _, perr := b.cache.OutputPath(b.provKey, ManifestFile); perr == nil {
			os.Remove(filepath.Dir(p))
		}
	}()
	m.BuildKey = b.provKey
	m.BaseKey = base.BuildKey
	m.ProvisionHash = b.provHash
	paths := map[string]string{}
	for _, name := range outputOrder {
		src := base.Outputs[name].Path
		if name == OutputDisk {
			src = disk
		}
		p, digest, err := b.cache.PutOutput(ctx, b.provKey, outputFiles[name], copyFrom(src))
		if err != nil {
			return nil, fmt.Errorf("image %q: storing output %s: %w", b.img.Name, name, err)
		}
		stored = append(stored, p)
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if name != OutputDisk && digest != base.Outputs[name].Digest {
			return nil, fmt.Errorf("image %q: output %s changed while it was stored: %s, then %s", b.img.Name, name, base.Outputs[name].Digest, digest)
		}
		m.Outputs[name] = ManifestOutput{File: outputFiles[name], Digest: digest, Size: fi.Size()}
		paths[name] = p
	}
	data, err := m.marshal()
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", b.img.Name, err)
	}
	mp, _, err := b.cache.PutOutput(ctx, b.provKey, ManifestFile, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("image %q: storing %s: %w", b.img.Name, ManifestFile, err)
	}
	r = m.result(mp)
	for name, p := range paths {
		o := r.Outputs[name]
		o.Path = p
		r.Outputs[name] = o
	}
	return r, nil
}
