package vfsmount

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
)

// Options configure a mount.
type Options struct {
	// Msize is the largest 9P message; zero means vfsproto.MaxMsize.
	Msize uint32
	// Cache is the 9p client's cache mode (vfsproto.CacheMmap, the
	// default, CacheNone or CacheLoose).
	Cache string
	// ReadOnly mounts read-only in the guest too (the host refuses
	// writes either way; this makes the refusal EROFS before a request
	// is sent).
	ReadOnly bool
	// Logger receives the relay's end; nil discards it.
	Logger *slog.Logger
}

// relay copies between the port and the kernel's socket until either
// side ends or stop is called; done is closed when both directions have
// ended.
type relay struct {
	port, sock io.ReadWriteCloser
	once       sync.Once
	done       chan struct{}
	err        error
}

func startRelay(port, sock io.ReadWriteCloser) *relay {
	r := &relay{port: port, sock: sock, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2)
	copyOne := func(dst io.Writer, src io.Reader, what string) {
		defer wg.Done()
		_, err := io.Copy(dst, src)
		if err != nil && !errors.Is(err, os.ErrClosed) {
			r.once.Do(func() { r.err = fmt.Errorf("%s: %w", what, err) })
		}
		// One direction ending ends the other.
		r.stop()
	}
	go copyOne(sock, port, "host to kernel")
	go copyOne(port, sock, "kernel to host")
	go func() {
		wg.Wait()
		close(r.done)
	}()
	return r
}

func (r *relay) stop() {
	r.port.Close()
	r.sock.Close()
}
