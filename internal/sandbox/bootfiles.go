package sandbox

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/platform"
)

// BootFiles returns what a machine boots of img: its kernel, initramfs
// and disk outputs, its platform and kernel parameters. An image without
// one of the three outputs, or with no platform recorded, is an error.
func BootFiles(img *Image) (machine.BootFiles, error) {
	if img == nil {
		return machine.BootFiles{}, errors.New("no image to boot")
	}
	for _, out := range []string{OutputKernel, OutputInitramfs, OutputDisk} {
		if _, ok := img.Outputs[out]; !ok {
			return machine.BootFiles{}, fmt.Errorf("image %s has no %s output", img.Image, out)
		}
	}
	if img.Platform == "" {
		return machine.BootFiles{}, fmt.Errorf("image %s: no platform recorded (a spec of an older sbx; start the sandbox again)", img.Image)
	}
	p, err := platform.Parse(img.Platform)
	if err != nil {
		return machine.BootFiles{}, fmt.Errorf("image %s: %w", img.Image, err)
	}
	return machine.BootFiles{
		Name:     img.Image,
		Kernel:   img.Outputs[OutputKernel].Path,
		Initrd:   img.Outputs[OutputInitramfs].Path,
		Disk:     img.Outputs[OutputDisk].Path,
		Platform: p,
		Cmdline:  strings.Fields(img.Cmdline),
	}, nil
}
