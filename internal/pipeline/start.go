package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxnet"
	"github.com/sbx-dev/sbx/lang"
)

// StartOptions configure Start.
type StartOptions struct {
	// BootTimeout bounds the boot; zero means machine.DefaultBootTimeout.
	BootTimeout time.Duration
	// Dir is where the VM's private directory is made; empty means the
	// temporary directory. It must be short: unix socket paths are.
	Dir string
	// Environ is where the values of the sandbox's env: secrets are
	// read; nil means this process's environment.
	Environ []string
	// AuditDir is where the sandbox's egress audit log is written; empty
	// means none is kept.
	AuditDir string
	// Logger receives what goes wrong on the sandbox's network; nil
	// discards it.
	Logger *slog.Logger
	// MountDirs replaces the host directory of workspace mounts, by the
	// mount's guest path, for this VM only: an eval run serves each run
	// its own copy of the workspace. The mount's rules are unchanged. A
	// guest path that no mount of the sandbox has is an error.
	MountDirs map[string]string
}

// Start boots a VM of sandbox sb of cfg from its built image img, with
// the sandbox's name, CPUs and memory, and its egress policy enforced on
// the host: the secrets' values are read here (a missing one is an error
// before anything boots), the VM's network device is served by the
// sandbox's network (package sandboxnet), its workspace mounts by their
// file servers (package sandboxfs), and the guest agent is told its
// address, the CA to trust, the secrets' placeholders and the mounts
// before Start returns (package boot). The VM is not stopped when ctx ends: Stop it; its
// network ends with it.
func Start(ctx context.Context, cfg *lang.Config, sb *lang.Sandbox, img *image.Result, opts StartOptions) (*machine.Machine, error) {
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	secrets, err := sandboxnet.ResolveSecrets(ctx, sb.Policy, cfg.Dir, environ)
	if err != nil {
		return nil, err
	}
	mounts, err := sandboxfs.Resolve(cfg, sb)
	if err != nil {
		return nil, err
	}
	if err := replaceMountDirs(mounts, opts.MountDirs); err != nil {
		return nil, err
	}
	s, err := sandbox.Start(ctx, sandbox.Options{
		Machine: machine.Options{
			Name:        sb.Name,
			Image:       img,
			CPUs:        sb.CPUs,
			Memory:      sb.Memory,
			BootTimeout: opts.BootTimeout,
			Dir:         opts.Dir,
		},
		Net: sandboxnet.Options{
			Sandbox:  sb.Name,
			Policy:   sb.Policy,
			Secrets:  secrets,
			AuditDir: opts.AuditDir,
			Logger:   opts.Logger,
		},
		Mounts: mounts,
	})
	if err != nil {
		return nil, err
	}
	go func() {
		<-s.Machine.Done()
		s.Close()
	}()
	return s.Machine, nil
}

// replaceMountDirs points the mounts named in dirs (by guest path) at
// their replacement host directories.
func replaceMountDirs(mounts []sandboxfs.Mount, dirs map[string]string) error {
	used := 0
	for i := range mounts {
		if d, ok := dirs[mounts[i].Policy.Guest]; ok {
			if !filepath.IsAbs(d) {
				return fmt.Errorf("mount %s: replacement host directory %q is not absolute", mounts[i].Policy.Guest, d)
			}
			mounts[i].HostDir = filepath.Clean(d)
			used++
		}
	}
	if used != len(dirs) {
		for g := range dirs {
			if !slices.ContainsFunc(mounts, func(m sandboxfs.Mount) bool { return m.Policy.Guest == g }) {
				return fmt.Errorf("the sandbox has no workspace mount at %s", g)
			}
		}
	}
	return nil
}
