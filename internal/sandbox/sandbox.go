package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxnet"
)

// Options configure Start.
type Options struct {
	// Machine is the machine to boot; its Network and Ports are the
	// sandbox's own and must be unset.
	Machine machine.Options
	// Net is the sandbox's network.
	Net sandboxnet.Options
	// Mounts are the sandbox's workspace mounts (sandboxfs.Resolve).
	Mounts []sandboxfs.Mount
}

// Sandbox is a started sandbox: its machine and what the host serves it.
type Sandbox struct {
	Machine *machine.Machine
	Net     *sandboxnet.Net
	FS      *sandboxfs.Set
}

// Start opens the mounts' file servers (a missing host directory is an
// error before anything boots), builds the network, boots the machine on
// both and configures its guest — address, resolver, CA, the secrets'
// placeholders, the mounts — before it returns. On failure nothing is
// left running. Close the Sandbox once its machine has stopped.
func Start(ctx context.Context, opts Options) (*Sandbox, error) {
	if opts.Machine.Network != nil || opts.Machine.Ports != nil {
		return nil, errors.New("boot: the machine's network and ports are the sandbox's own")
	}
	fs, err := sandboxfs.Open(opts.Mounts, opts.Net.Logger)
	if err != nil {
		return nil, err
	}
	n, err := sandboxnet.New(opts.Net)
	if err != nil {
		return nil, errors.Join(err, fs.Close())
	}
	mopts := opts.Machine
	mopts.Network = n.Network()
	mopts.Ports = fs.Ports()
	m, err := machine.Start(ctx, mopts)
	if err != nil {
		return nil, errors.Join(err, n.Close(), fs.Close())
	}
	s := &Sandbox{Machine: m, Net: n, FS: fs}
	if err := m.Client().Configure(ctx, s.Configure()); err != nil {
		err = fmt.Errorf("configuring the guest: %w", err)
		return nil, errors.Join(err, m.Stop(context.WithoutCancel(ctx)), s.Close())
	}
	return s, nil
}

// Configure is everything the guest agent must be told.
func (s *Sandbox) Configure() agentproto.Configure {
	c := s.Net.Configure()
	c.Mounts = s.FS.Guest()
	return c
}

// Close releases what the host served the sandbox. Its machine must have
// stopped.
func (s *Sandbox) Close() error {
	return errors.Join(s.Net.Close(), s.FS.Close())
}
