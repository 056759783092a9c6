package sandbox

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/platform"
)

// BootFiles returns what a machine boots of the built image img: its
// kernel, initramfs and disk outputs, and the platform and kernel
// parameters its manifest (image.json) records. An image without one of
// the three outputs, or whose manifest cannot be read, is an error.
func BootFiles(img *image.Result) (machine.BootFiles, error) {
	if img == nil {
		return machine.BootFiles{}, errors.New("no image to boot")
	}
	for _, out := range []string{image.OutputKernel, image.OutputInitramfs, image.OutputDisk} {
		if _, ok := img.Outputs[out]; !ok {
			return machine.BootFiles{}, fmt.Errorf("image %s has no %s output", img.Image, out)
		}
	}
	manifest, err := image.ReadManifest(img.Manifest)
	if err != nil {
		return machine.BootFiles{}, err
	}
	p, err := platform.Parse(manifest.Platform)
	if err != nil {
		return machine.BootFiles{}, fmt.Errorf("%s: %w", img.Manifest, err)
	}
	return machine.BootFiles{
		Name:     img.Image,
		Kernel:   img.Outputs[image.OutputKernel].Path,
		Initrd:   img.Outputs[image.OutputInitramfs].Path,
		Disk:     img.Outputs[image.OutputDisk].Path,
		Platform: p,
		Cmdline:  strings.Fields(manifest.Cmdline),
	}, nil
}
