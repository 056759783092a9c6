//go:build !linux

package sandboxfs

import (
	"context"
	"errors"
	"log/slog"

	"github.com/sbx-dev/sbx/internal/machine"
)

// Open serves no mounts where sbx's file server does not run (it needs
// Linux's openat2): a sandbox with mounts is an error.
func Open(mounts []Mount, log *slog.Logger) (*Set, error) {
	if len(mounts) > 0 {
		return nil, errors.New("workspace mounts are served on Linux hosts only")
	}
	return &Set{ports: map[string]machine.Port{}}, nil
}

// device is a mount served by a virtio-fs device: none here.
type device struct{}

// Plug has nothing to plug where no mounts are served.
func (s *Set) Plug(ctx context.Context, m *machine.Machine) error { return nil }
