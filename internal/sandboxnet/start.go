package sandboxnet

import (
	"context"
	"errors"
	"fmt"

	"github.com/sbx-dev/sbx/machine"
)

// Start boots a machine (machine.Start with mopts) whose network device
// is served by a new Net for opts, tells its guest agent the network's
// configuration (Configure) before anything else runs there, and returns
// both once the guest is configured. On failure nothing is left: the
// machine is stopped and the Net closed. The Net is the caller's to
// close once the machine has stopped.
func Start(ctx context.Context, mopts machine.Options, opts Options) (*machine.Machine, *Net, error) {
	n, err := New(opts)
	if err != nil {
		return nil, nil, err
	}
	mopts.Network = n.Network()
	m, err := machine.Start(ctx, mopts)
	if err != nil {
		return nil, nil, errors.Join(err, n.Close())
	}
	if err := m.Client().Configure(ctx, n.Configure()); err != nil {
		err = fmt.Errorf("configuring the guest's network: %w", err)
		return nil, nil, errors.Join(err, m.Stop(context.WithoutCancel(ctx)), n.Close())
	}
	return m, n, nil
}
