package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sbx-dev/sbx/internal/bindings"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxnet"
	"github.com/sbx-dev/sbx/internal/snapshot"
	"github.com/sbx-dev/sbx/lang"
)

// SandboxSpec is what starts sandbox sb of cfg booted from its built
// image img (sandbox.Start, directly or in a supervisor): the sandbox's
// name, CPUs and memory, its policy and mounts (Mounts), and the
// defaults of the commands run in it (its user, and the image's then the
// sandbox's environment). A mount whose owner is not a user of the image,
// or an image whose manifest cannot be read (SandboxImage), is an error.
func SandboxSpec(cfg *lang.Config, sb *lang.Sandbox, img *image.Result) (sandbox.Spec, error) {
	mounts, err := Mounts(cfg, sb)
	if err != nil {
		return sandbox.Spec{}, fmt.Errorf("sandbox.%s: %w", sb.Name, err)
	}
	si, err := SandboxImage(img)
	if err != nil {
		return sandbox.Spec{}, fmt.Errorf("sandbox.%s: %w", sb.Name, err)
	}
	return sandbox.Spec{
		Policy:    sb.Policy,
		Mounts:    mounts,
		Name:      sb.Name,
		ConfigDir: cfg.Dir,
		Image:     si,
		CPUs:      sb.CPUs,
		Memory:    sb.Memory,
		User:      sb.User,
		Env:       cfg.CommandEnv(sb),
	}, nil
}

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
	// Cold boots the sandbox's machine even where a warm start could
	// resume it from a saved machine of its shape.
	Cold bool
	// MountTransport is how the mounts reach the guest
	// (sandbox.Options.MountTransport); empty means the environment's
	// sandboxfs.EnvTransport, and choosing when that is unset.
	MountTransport sandboxfs.Transport

	// snapshots is the cache of saved machines a warm start uses; nil
	// means the one in the cache directory (SnapshotDir), opened for
	// the start. EvalStart sets one for all its runs, so that their
	// machines share the saved memory.
	snapshots *snapshot.Cache
	// bindings is the user's bindings file (WithBindings).
	bindings *bindings.File
	// secretValues are values given for secrets (WithSecretValues).
	secretValues map[string][]byte
}

// WithSecretValues returns opts with values, by secret name, that the
// caller read itself (sbx node, from Kubernetes Secrets): those secrets
// take them instead of a source (sandboxnet.SecretSources.Values). It is
// not a field for the reason WithBindings gives.
func (opts StartOptions) WithSecretValues(values map[string][]byte) StartOptions {
	opts.secretValues = values
	return opts
}

// WithBindings returns opts with f, the user's bindings file, which says
// where this host reads each secret's value (sandboxnet.ResolveSecrets);
// without it there are none, and only the spec's env: and file: sources
// are read. It is not a field so that StartOptions stays the mirror of
// sbx.StartOptions: the Go API carries the bindings with the
// configuration (sbx.Options.Bindings).
func (opts StartOptions) WithBindings(f *bindings.File) StartOptions {
	opts.bindings = f
	return opts
}

// Start starts sandbox sb of cfg from its built image img in this
// process: its spec (SandboxSpec) with the secrets' values read here,
// from the sources the bindings (WithBindings) and the spec give them (a missing one,
// or one the spec leaves to a command, is an error before anything
// boots) and opts.MountDirs
// applied, through sandbox.Start, which enforces its egress policy on
// the VM's network, serves its mounts and configures the guest before
// it returns. The sandbox is not stopped when ctx ends: Stop it.
func Start(ctx context.Context, cfg *lang.Config, sb *lang.Sandbox, img *image.Result, opts StartOptions) (*sandbox.Sandbox, error) {
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	secrets, err := sandboxnet.ResolveSecrets(ctx, sb.Policy, sandboxnet.SecretSources{ConfigDir: cfg.Dir, Bindings: opts.bindings, Environ: environ, Values: opts.secretValues})
	if err != nil {
		return nil, err
	}
	spec, err := SandboxSpec(cfg, sb, img)
	if err != nil {
		return nil, err
	}
	if err := replaceMountDirs(spec.Mounts, opts.MountDirs); err != nil {
		return nil, err
	}
	spec.BootTimeout = opts.BootTimeout
	snaps := opts.snapshots
	if snaps == nil && !opts.Cold {
		if snaps, err = OpenSnapshots(Env{Environ: environ}); err != nil {
			return nil, err
		}
		// The machine keeps its memory mapped; the cache's copy is
		// this start's only.
		defer snaps.Close()
	}
	if opts.Cold {
		snaps = nil
	}
	transport := opts.MountTransport
	if transport == "" {
		t, _ := Env{Environ: environ}.Getenv(sandboxfs.EnvTransport)
		transport = sandboxfs.Transport(t)
	}
	return sandbox.Start(ctx, spec, sandbox.Options{
		Dir:            opts.Dir,
		Secrets:        secrets,
		AuditDir:       opts.AuditDir,
		Logger:         opts.Logger,
		Snapshots:      snaps,
		MountTransport: transport,
	})
}

// OpenSnapshots opens the cache of saved machines in SnapshotDir.
func OpenSnapshots(env Env) (*snapshot.Cache, error) {
	dir, err := SnapshotDir(env)
	if err != nil {
		return nil, err
	}
	return snapshot.Open(dir)
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
