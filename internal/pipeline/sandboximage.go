package pipeline

import (
	"errors"
	"fmt"

	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/sandbox"
)

// SandboxImage is the built image img as a sandbox boots it: the
// builder's result with the platform and kernel parameters of its
// manifest (image.json), which must be readable.
func SandboxImage(img *image.Result) (*sandbox.Image, error) {
	if img == nil {
		return nil, errors.New("no image to boot")
	}
	manifest, err := image.ReadManifest(img.Manifest)
	if err != nil {
		return nil, err
	}
	out := &sandbox.Image{
		Image:         img.Image,
		InputHash:     img.InputHash,
		BuildKey:      img.BuildKey,
		Cached:        img.Cached,
		Manifest:      img.Manifest,
		KernelVersion: img.KernelVersion,
		DiskSize:      img.DiskSize,
		Packages:      img.Packages,
		Executables:   img.Executables,
		Platform:      manifest.Platform,
		Cmdline:       manifest.Cmdline,
	}
	if img.Outputs != nil {
		out.Outputs = make(map[string]sandbox.ImageOutput, len(img.Outputs))
		for name, o := range img.Outputs {
			out.Outputs[name] = sandbox.ImageOutput{Path: o.Path, Digest: o.Digest, Size: o.Size}
		}
	}
	return out, nil
}

// BootFiles is what a machine boots of the built image img
// (SandboxImage, then sandbox.BootFiles): for the tests and benchmarks
// that boot a bare machine.
func BootFiles(img *image.Result) (machine.BootFiles, error) {
	si, err := SandboxImage(img)
	if err != nil {
		return machine.BootFiles{}, err
	}
	b, err := sandbox.BootFiles(si)
	if err != nil {
		return machine.BootFiles{}, fmt.Errorf("%s: %w", img.Manifest, err)
	}
	return b, nil
}
