//go:build linux

package sandboxfs

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/internal/proto/vfsproto"
	"github.com/sbx-dev/sbx/internal/vfs"
	"github.com/sbx-dev/sbx/policy"
)

// Open starts a file server for each mount. A host directory that is
// missing or not a directory is an error naming the mount and its spec
// line; nothing is left open then.
func Open(mounts []Mount, log *slog.Logger) (*Set, error) {
	s := &Set{ports: map[string]machine.Port{}}
	for i, m := range mounts {
		srv, err := vfs.New(m.Policy, vfs.Options{HostDir: m.HostDir, UID: m.UID, GID: m.GID, Logger: log})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("%w%s", err, where(m.Policy.Origin))
		}
		s.servers = append(s.servers, srv)
		g := agentproto.Mount{
			Path: m.Policy.Guest,
			// A read-only mount with tmpfs paths is mounted writable:
			// its scratch space takes writes, and the host refuses
			// every other one.
			ReadOnly: m.Policy.Access != policy.ReadWrite && len(m.Policy.Tmpfs) == 0,
		}
		switch m.Transport {
		case TransportVirtioFS:
			g.Tag = agentproto.MountTag(len(s.devices))
			s.devices = append(s.devices, device{srv: srv, tag: g.Tag, guest: m.Policy.Guest})
		case "", Transport9P:
			g.Port = vfsproto.PortName(i)
			s.ports[g.Port] = server{s: srv, port: g.Port, guest: m.Policy.Guest, log: log}
		default:
			s.Close()
			return nil, fmt.Errorf("mount %s: %w%s", m.Policy.Guest, CheckTransport(m.Transport), where(m.Policy.Origin))
		}
		s.guest = append(s.guest, g)
	}
	if len(s.devices) > machine.MaxFSSlots {
		s.Close()
		return nil, fmt.Errorf("%d mounts served by virtio-fs devices; a machine takes at most %d", len(s.devices), machine.MaxFSSlots)
	}
	s.log = log
	return s, nil
}

// device is a mount served by a virtio-fs device.
type device struct {
	srv   *vfs.Server
	tag   string
	guest string
}

// server serves one mount on its port.
type server struct {
	s     *vfs.Server
	port  string
	guest string
	log   *slog.Logger
}

// Serve serves the mount on conn, logging (at Info) the first bytes the
// guest sends and the first the server answers: the guest's mount
// waits on that exchange (its version request and the answer), and
// when a mount never finishes the log says whether the host saw the
// request and answered it.
func (p server) Serve(ctx context.Context, conn net.Conn) error {
	log := p.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("port", p.port, "mount", p.guest)
	log.Info("vfs: serving the mount's port")
	return p.s.Serve(ctx, &firstBytes{Conn: conn, log: log})
}

// firstBytes logs the first read and the first write on its Conn.
type firstBytes struct {
	net.Conn
	log         *slog.Logger
	read, wrote atomic.Bool
}

func (c *firstBytes) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.read.Swap(true) {
		c.log.Info("vfs: first message from the guest", "bytes", n, "type", msgType(b[:n]))
	}
	return n, err
}

func (c *firstBytes) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if !c.wrote.Swap(true) {
		c.log.Info("vfs: first answer to the guest", "bytes", n, "type", msgType(b[:n]), "error", err)
	}
	return n, err
}

// msgType is the 9P message type of a message that starts b (100 is
// Tversion, 101 Rversion), or -1 when b is shorter than its header.
func msgType(b []byte) int {
	if len(b) < 5 {
		return -1
	}
	return int(b[4])
}
