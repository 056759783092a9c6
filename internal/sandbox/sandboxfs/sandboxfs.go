package sandboxfs

import (
	"errors"
	"fmt"
	"io"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/policy"
)

// Mount is one mount as a started sandbox serves it.
type Mount struct {
	// Policy is the mount as the sandbox's policy has it.
	Policy policy.Mount `json:"policy"`
	// HostDir is its host directory, absolute.
	HostDir string `json:"host_dir"`
	// UID and GID own every file the guest sees there.
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// Set is the file servers of one sandbox's mounts.
type Set struct {
	servers []io.Closer
	ports   map[string]machine.Port
	guest   []agentproto.Mount
}

// Ports are the machine's ports that carry the mounts.
func (s *Set) Ports() map[string]machine.Port { return s.ports }

// Guest is what the guest agent must mount.
func (s *Set) Guest() []agentproto.Mount { return s.guest }

// Close releases every host directory. The machine must have stopped.
func (s *Set) Close() error {
	var errs []error
	for _, srv := range s.servers {
		errs = append(errs, srv.Close())
	}
	s.servers = nil
	return errors.Join(errs...)
}

// where is " (file:line)" of o, or nothing when o has no file.
func where(o policy.Origin) string {
	if o.File == "" {
		return ""
	}
	return fmt.Sprintf(" (%s:%d)", o.File, o.Line)
}
