//go:build linux

package sandboxfs

import (
	"context"
	"fmt"
	"log/slog"
	"net"

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
		port := vfsproto.PortName(i)
		s.ports[port] = server{srv}
		s.guest = append(s.guest, agentproto.Mount{
			Port: port,
			Path: m.Policy.Guest,
			// A read-only mount with tmpfs paths is mounted writable:
			// its scratch space takes writes, and the host refuses
			// every other one.
			ReadOnly: m.Policy.Access != policy.ReadWrite && len(m.Policy.Tmpfs) == 0,
		})
	}
	return s, nil
}

// server serves one mount on its port.
type server struct{ s *vfs.Server }

func (p server) Serve(ctx context.Context, conn net.Conn) error { return p.s.Serve(ctx, conn) }
