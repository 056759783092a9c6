package sandboxfs

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

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
	// Transport is how the mount reaches the guest; empty is
	// Transport9P.
	Transport Transport `json:"transport,omitempty"`
}

// Transport is how a mount reaches the guest.
type Transport string

const (
	// Transport9P serves a mount over 9P on a virtio-serial port of
	// its own, which the guest agent relays to the kernel's 9p client
	// (decision 0008).
	Transport9P Transport = "9p"
	// TransportVirtioFS serves it by a virtio-fs device plugged into
	// the running machine, which the guest kernel speaks FUSE to; the
	// host's backend reads the requests from guest memory (decision
	// 0011).
	TransportVirtioFS Transport = "virtiofs"
)

// EnvTransport is the environment variable that names the transport
// of mounts that name none (sandbox.Options.MountTransport): "9p" or
// "virtiofs"; unset or empty chooses.
const EnvTransport = "SBX_MOUNT_TRANSPORT"

// CheckTransport refuses a transport other than the two.
func CheckTransport(t Transport) error {
	switch t {
	case "", Transport9P, TransportVirtioFS:
		return nil
	}
	return fmt.Errorf("mount transport %q: use %q or %q", t, Transport9P, TransportVirtioFS)
}

// Set is the file servers of one sandbox's mounts.
type Set struct {
	servers []io.Closer
	ports   map[string]machine.Port
	guest   []agentproto.Mount
	devices []device // the mounts served by virtio-fs devices
	stop    func()   // ends the devices' backends and waits for them
	log     *slog.Logger
}

// FSSlots is how many file system slots the machine needs
// (machine.Options.FSSlots): one per mount served by a virtio-fs device.
func (s *Set) FSSlots() int { return len(s.devices) }

// Ports are the machine's ports that carry the mounts.
func (s *Set) Ports() map[string]machine.Port { return s.ports }

// Guest is what the guest agent must mount.
func (s *Set) Guest() []agentproto.Mount { return s.guest }

// Close releases every host directory. The machine must have stopped.
func (s *Set) Close() error {
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
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
