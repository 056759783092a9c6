package sandboxfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/vfs"
	"github.com/sbx-dev/sbx/internal/virtio/vhostuser"
	"github.com/sbx-dev/sbx/internal/virtio/virtq"
)

// fsQueues are a virtio-fs device's queues: the high-priority one
// (FORGET, INTERRUPT) and one request queue, as QEMU's
// vhost-user-fs-pci has them by default (num-request-queues=1).
const fsQueues = 2

// Plug gives m, running, a virtio-fs device for each mount served by
// one (its slot is the mount's index among them, m must have FSSlots
// slots), each answered by its mount's file server from this process
// until Close. The guest mounts them by tag once configured (Guest).
// On failure the devices plugged so far keep being served until Close.
func (s *Set) Plug(ctx context.Context, m *machine.Machine) error {
	if len(s.devices) == 0 {
		return nil
	}
	log := s.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var conns []net.Conn
	s.stop = func() {
		cancel()
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}
	for slot, d := range s.devices {
		ours, theirs, err := socketPair()
		if err != nil {
			return fmt.Errorf("mount %s: %w", d.guest, err)
		}
		conns = append(conns, ours)
		h := handler{f: d.srv.FUSE(vfs.FUSEOptions{})}
		dlog := log.With("mount", d.guest, "tag", d.tag)
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveDevice(sctx, ours, h, dlog)
		}()
		err = m.AddFS(ctx, slot, d.tag, theirs)
		theirs.Close()
		if err != nil {
			return fmt.Errorf("mount %s: %w", d.guest, err)
		}
	}
	return nil
}

// serveDevice runs a device's backend on conn until the hypervisor
// closes it, ctx ends or the backend refuses a request, and then closes
// conn: the hypervisor sees a failed device rather than waiting for
// good, its main loop stopped, for the answer to its next request.
func serveDevice(ctx context.Context, conn *net.UnixConn, dev vhostuser.Device, log *slog.Logger) {
	defer conn.Close()
	if err := vhostuser.Serve(ctx, conn, dev, vhostuser.Options{Queues: fsQueues, Logger: log}); err != nil && !errors.Is(err, context.Canceled) {
		log.Warn("vfs: the virtio-fs device's backend ended", "error", err)
	}
}

// handler hands a device's requests to the mount's FUSE server.
type handler struct{ f *vfs.FUSE }

func (h handler) Handle(q int, c *virtq.Chain) uint32 {
	return uint32(h.f.Handle(c.Readable, c.Writable))
}

// socketPair returns a connected unix stream socket pair: this
// process's end, and the hypervisor's, which the caller closes once
// handed over.
func socketPair() (*net.UnixConn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	f := os.NewFile(uintptr(fds[0]), "vhost-user")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, err
	}
	return c.(*net.UnixConn), os.NewFile(uintptr(fds[1]), "vhost-user"), nil
}
