//go:build linux

package vfs

import (
	"context"
	"errors"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// ServeDev answers the kernel's FUSE requests on dev, an opened
// /dev/fuse whose mount the caller made, until the mount ends (nil) or
// ctx is done (ctx's error). devWorkers workers each read one request
// per read and write one reply per write; each waits for a request at
// most devPoll at a time, so that a done ctx ends ServeDev within
// that. The caller unmounts and closes dev after ServeDev returns.
//
// The serving process should not itself open regular files on the
// mount with package os, nor fork children that start in it: both make
// the kernel ask the server from a thread that holds one of the
// runtime's Ps without yielding it (epoll_ctl asks FUSE_POLL; a
// child's chdir before exec), and a garbage collection starting then
// never finishes, nor does the request.
func (f *FUSE) ServeDev(ctx context.Context, dev *os.File) error {
	rc, err := dev.SyscallConn()
	if err != nil {
		return err
	}
	fd := -1
	if err := rc.Control(func(u uintptr) { fd = int(u) }); err != nil {
		return err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return err
	}
	var wg sync.WaitGroup
	workers := min(f.fs.lim.Requests, devWorkers)
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- f.serveDev(ctx, fd)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// devWorkers is how many requests ServeDev answers at once. Every
// worker waiting in poll(2) wakes for each request, so more cost more
// than they bring on a /dev/fuse (a virtqueue has no such herd).
const devWorkers = 4

// devPoll is how long, in milliseconds, a worker waits for a request
// before it looks at its context again.
const devPoll = 100

func (f *FUSE) serveDev(ctx context.Context, fd int) error {
	buf := make([]byte, f.MaxRequest())
	out := make([]byte, f.MaxRequest())
	for ctx.Err() == nil {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, devPoll); err != nil && err != unix.EINTR {
			return err
		}
		if pfd[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
			return nil // unmounted
		}
		if pfd[0].Revents&unix.POLLIN == 0 {
			continue
		}
		n, err := unix.Read(fd, buf)
		switch {
		case errors.Is(err, unix.ENODEV):
			return nil // unmounted
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.ENOENT), errors.Is(err, unix.EAGAIN):
			continue // interrupted, or another worker took it
		case err != nil:
			return err
		}
		k := f.Handle([][]byte{buf[:n]}, [][]byte{out})
		if k == 0 {
			continue
		}
		// ENOENT: the request was interrupted meanwhile.
		if _, err := unix.Write(fd, out[:k]); errors.Is(err, unix.ENODEV) {
			return nil
		}
	}
	return nil
}
