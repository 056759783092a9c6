//go:build !linux

package netcfg

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

// DefaultLinkWait is how long Apply waits for the interface to appear.
const DefaultLinkWait = 10 * time.Second

// Options adjust Apply.
type Options struct {
	LinkWait time.Duration
	Poll     time.Duration
}

// Apply configures a Linux guest's interface; elsewhere it reports
// errors.ErrUnsupported.
func Apply(ctx context.Context, nc agentproto.NetConfig, opts Options) error {
	return errors.ErrUnsupported
}

// Link is a network interface as the kernel lists it.
type Link struct {
	Index int32
	Name  string
	MAC   net.HardwareAddr
	Flags uint32
}

// Links lists a Linux guest's interfaces; elsewhere it reports
// errors.ErrUnsupported.
func Links() ([]Link, error) { return nil, errors.ErrUnsupported }
