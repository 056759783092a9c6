//go:build linux

package vhostuser

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/virtio/virtq"
)

// worker serves one started queue: it waits for kicks, pops chains, hands
// each to the device in a goroutine of its own (at most inFlight at
// once), pushes them back and signals the call descriptor.
type worker struct {
	index int
	q     *virtq.Queue
	dev   Device
	log   *slog.Logger
	kick  int // borrowed from the vring; not closed here

	stopFD int           // eventfd that wakes the kick wait; owned
	stop   chan struct{} // closed to stop
	done   chan struct{} // closed when the worker and its handlers ended
	slots  chan struct{} // one token per chain being handled

	mu   sync.Mutex // serialises Push, NeedNotify and the use of call and errFD
	call int        // -1: no notification
	errF int        // -1: none

	failure error // why the queue broke; read after done
}

func startWorker(index int, q *virtq.Queue, dev Device, log *slog.Logger, kick, call, errFD, inFlight int) (*worker, error) {
	stopFD, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("vhost-user: queue %d: %w", index, err)
	}
	w := &worker{
		index: index, q: q, dev: dev, log: log, kick: kick,
		stopFD: stopFD,
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		slots:  make(chan struct{}, inFlight),
		call:   call, errF: errFD,
	}
	go w.run()
	return w, nil
}

// halt stops the worker and waits until it and every chain it handed out
// are done; then nothing touches the queue's memory any more. It returns
// the index the queue stopped at.
func (w *worker) halt() uint16 {
	close(w.stop)
	signal(w.stopFD)
	<-w.done
	unix.Close(w.stopFD)
	return w.q.LastAvail()
}

// setCall replaces the call descriptor and returns the old one.
func (w *worker) setCall(fd int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	old := w.call
	w.call = fd
	return old
}

// setErr replaces the error descriptor and returns the old one.
func (w *worker) setErr(fd int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	old := w.errF
	w.errF = fd
	return old
}

func (w *worker) run() {
	var handlers sync.WaitGroup
	defer close(w.done)
	defer handlers.Wait()
	for {
		// Take every chain there is, each once a slot is free.
		for {
			select {
			case w.slots <- struct{}{}:
			case <-w.stop:
				return
			}
			c, err := w.q.Pop()
			if err != nil {
				<-w.slots
				w.fail(err)
				return
			}
			if c == nil {
				<-w.slots
				break
			}
			handlers.Add(1)
			go func() {
				defer handlers.Done()
				defer func() { <-w.slots }()
				w.handle(c)
			}()
		}
		if err := w.wait(); err != nil {
			if !errors.Is(err, errStopped) {
				w.fail(err)
			}
			return
		}
	}
}

var errStopped = errors.New("stopped")

// wait blocks until the driver kicks or the worker is stopped.
func (w *worker) wait() error {
	fds := []unix.PollFd{{Fd: int32(w.kick), Events: unix.POLLIN}, {Fd: int32(w.stopFD), Events: unix.POLLIN}}
	for {
		select {
		case <-w.stop:
			return errStopped
		default:
		}
		_, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("waiting for a kick: %w", err)
		}
		if fds[1].Revents != 0 {
			return errStopped
		}
		if fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
			return fmt.Errorf("kick descriptor failed (poll events %#x)", fds[0].Revents)
		}
		if fds[0].Revents&unix.POLLIN != 0 {
			var b [8]byte
			if _, err := unix.Read(w.kick, b[:]); err != nil && err != unix.EAGAIN && err != unix.EINTR {
				return fmt.Errorf("reading the kick descriptor: %w", err)
			}
			return nil
		}
	}
}

func (w *worker) handle(c *virtq.Chain) {
	written := w.dev.Handle(w.index, c)
	capacity := 0
	for _, b := range c.Writable {
		capacity += len(b)
	}
	if uint64(written) > uint64(capacity) {
		w.log.Warn("vhost-user: device claims more bytes than the chain holds", "queue", w.index, "written", written, "capacity", capacity)
		written = uint32(capacity)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.q.Push(c.Head, written); err != nil {
		w.log.Error("vhost-user: push", "queue", w.index, "err", err)
		return
	}
	if w.q.NeedNotify() && w.call >= 0 {
		signal(w.call)
	}
}

// fail records why the queue broke and tells the front-end through the
// error descriptor.
func (w *worker) fail(err error) {
	w.failure = err
	w.log.Warn("vhost-user: queue stopped", "queue", w.index, "err", err)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.errF >= 0 {
		signal(w.errF)
	}
}

// signal adds one to an eventfd. A full counter (EAGAIN) already means
// "signalled".
func signal(fd int) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], 1)
	unix.Write(fd, b[:])
}
