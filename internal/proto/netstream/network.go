package netstream

import (
	"context"
	"net"
)

// Network serves a machine's one network device. The guest's virtio-net
// device is attached, through QEMU's "-netdev stream", to a unix socket
// the machine listens on in its directory (NetSocket); Serve is given
// the one connection QEMU makes to it, which carries the guest's
// Ethernet frames each preceded by its length (this package). What
// Serve writes back is what the guest receives.
//
// Serve runs from Start until the machine stops. It must return once
// conn fails or ends or ctx is done: Stop cancels ctx and closes conn.
// The machine closes conn after Serve returns, leaving the guest's
// device with nothing behind it. An error Serve returns before Stop is
// called, io.EOF (QEMU closed the connection) aside, is the machine's
// NetErr.
//
// A Network that also has a method Stats() Stats, as Sink does,
// reports through the machine (Machine.NetStats).
type Network interface {
	Serve(ctx context.Context, conn net.Conn) error
}

// Stats counts what the guest sent on its network device.
type Stats struct {
	// Frames is the number of Ethernet frames.
	Frames uint64
	// Bytes is their length in total, without the length prefixes.
	Bytes uint64
}
