package pipeline

import (
	"context"
	"time"

	"github.com/sbx-dev/sbx/builders/image"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/machine"
)

// StartOptions configure Start.
type StartOptions struct {
	// BootTimeout bounds the boot; zero means machine.DefaultBootTimeout.
	BootTimeout time.Duration
	// Dir is where the VM's private directory is made; empty means the
	// temporary directory. It must be short: unix socket paths are.
	Dir string
}

// Start boots a VM of sandbox sb from its built image img, with the
// sandbox's name, CPUs and memory, and returns once the guest agent
// answers. The VM is not stopped when ctx ends: Stop it.
func Start(ctx context.Context, sb *lang.Sandbox, img *image.Result, opts StartOptions) (*machine.Machine, error) {
	return machine.Start(ctx, machine.Options{
		Name:        sb.Name,
		Image:       img,
		CPUs:        sb.CPUs,
		Memory:      sb.Memory,
		BootTimeout: opts.BootTimeout,
		Dir:         opts.Dir,
	})
}
