package pipeline

import (
	"context"
	"time"

	"github.com/sbx-dev/sbx/builders/image"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/machine"
	"github.com/sbx-dev/sbx/supervisor"
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

// Spec is what a supervisor runs for sandbox sb of cfg, booted from its
// built image img: the sandbox's name, CPUs and memory, and the defaults
// of the commands run in it (its user, and the image's then the
// sandbox's environment). sbx apply and the benchmarks spawn supervisors
// with it (supervisor.Spawn).
func Spec(cfg *lang.Config, sb *lang.Sandbox, img *image.Result) supervisor.Spec {
	return supervisor.Spec{
		Name:      sb.Name,
		ConfigDir: cfg.Dir,
		Image:     img,
		CPUs:      sb.CPUs,
		Memory:    sb.Memory,
		User:      sb.User,
		Env:       cfg.CommandEnv(sb),
	}
}
