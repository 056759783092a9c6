package vfsmount

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/proto/vfsproto"
)

// fsRetry is how often MountFS tries again while the device is not
// there yet.
const fsRetry = 20 * time.Millisecond

// MountFS mounts the virtio-fs file system the host serves by the tag
// tag at guestPath, making guestPath (mode 0755) if needed. The host
// adds the device while the guest runs, so the kernel may not have
// found it yet: a mount that fails because no device has the tag
// (EINVAL, as the virtiofs driver answers then) is tried again every
// fsRetry until opts.Timeout (vfsproto.MountTimeout) has passed or ctx
// is done. No process of the guest's carries its requests: the kernel
// speaks to the device, and the host answers.
func MountFS(ctx context.Context, tag, guestPath string, opts Options) error {
	if err := os.MkdirAll(guestPath, 0o755); err != nil {
		return fmt.Errorf("mount %s: %w", guestPath, err)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = vfsproto.MountTimeout
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if opts.ReadOnly {
		flags |= unix.MS_RDONLY
	}
	deadline := time.Now().Add(timeout)
	for tries := 1; ; tries++ {
		err := sysMount(tag, guestPath, "virtiofs", flags, "")
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, unix.EINVAL):
			return fmt.Errorf("mount %s from %s: %w", guestPath, tag, err)
		case time.Now().After(deadline):
			return fmt.Errorf("mount %s: no virtio-fs device %q appeared within %v (%d tries: %v)", guestPath, tag, timeout, tries, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mount %s from %s: %w", guestPath, tag, ctx.Err())
		case <-time.After(fsRetry):
		}
	}
}
