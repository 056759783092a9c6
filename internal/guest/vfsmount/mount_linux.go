package vfsmount

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/vfs/vfsproto"
)

// Mount mounts the file system served on the virtio-serial port device
// portPath (such as /dev/vport0p3) at guestPath, making guestPath (mode
// 0755) if needed. It returns once the kernel has mounted it; the relay
// then runs until ctx is done or the host end closes, after which the
// mount's operations fail (EIO) until it is unmounted.
func Mount(ctx context.Context, portPath, guestPath string, opts Options) error {
	port, err := os.OpenFile(portPath, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("mount %s: %w", guestPath, err)
	}
	if err := mountOn(ctx, port, guestPath, opts); err != nil {
		port.Close()
		return err
	}
	return nil
}

// mountOn mounts the file system spoken on port at guestPath.
func mountOn(ctx context.Context, port io.ReadWriteCloser, guestPath string, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(guestPath, 0o755); err != nil {
		return fmt.Errorf("mount %s: %w", guestPath, err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("mount %s: socket pair: %w", guestPath, err)
	}
	kernelFD := fds[0]
	relayFile := os.NewFile(uintptr(fds[1]), "vfs relay")
	sock, err := net.FileConn(relayFile)
	relayFile.Close()
	if err != nil {
		unix.Close(kernelFD)
		return fmt.Errorf("mount %s: %w", guestPath, err)
	}
	// The kernel's client speaks as soon as mount(2) is called and waits
	// for answers, so the relay runs first.
	r := startRelay(port, sock)
	data, err := vfsproto.MountData(kernelFD, kernelFD, opts.Msize, opts.Cache)
	if err != nil {
		r.stop()
		unix.Close(kernelFD)
		return err
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if opts.ReadOnly {
		flags |= unix.MS_RDONLY
	}
	err = unix.Mount("sbx", guestPath, "9p", flags, data)
	// The kernel holds its own reference to the socket now.
	unix.Close(kernelFD)
	if err != nil {
		r.stop()
		<-r.done
		return fmt.Errorf("mount %s: mount -t 9p -o %s: %w", guestPath, data, err)
	}
	go func() {
		select {
		case <-ctx.Done():
			r.stop()
		case <-r.done:
		}
		<-r.done
		log.Info("vfs relay ended", "path", guestPath, "error", r.err)
	}()
	return nil
}
