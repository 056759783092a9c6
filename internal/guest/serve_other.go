//go:build !linux

package guest

import (
	"context"
	"errors"
	"time"

	"github.com/sbx-dev/sbx/internal/guest/execsrv"
	"github.com/sbx-dev/sbx/internal/guest/initsys"
)

// startReaper starts the reaper of the platform's processes, where there
// are any to reap.
func startReaper() (execsrv.Reaper, func()) {
	return nil, initsys.StartReaper(time.Second)
}

// serve needs Linux's virtio-serial ports and processes.
func serve(ctx context.Context, root string, console *lockedWriter, reaper execsrv.Reaper, poll time.Duration) error {
	return errors.ErrUnsupported
}
