package execsrv

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// ChildWaiter is the Reaper of a process that is not PID 1 and runs no
// reaper of its own, such as a test: it waits for each process it started
// by pid (wait4(pid)), and for nothing else.
type ChildWaiter struct{}

var _ Reaper = ChildWaiter{}

// Start implements Reaper.
func (ChildWaiter) Start(start func() (int, error)) (<-chan syscall.WaitStatus, error) {
	pid, err := start()
	if err != nil {
		return nil, err
	}
	ch := make(chan syscall.WaitStatus, 1)
	go func() {
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(pid, &ws, 0, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				// Someone else reaped it: the process is gone and
				// its status unknown. Report a kill rather than hang.
				ws = syscall.WaitStatus(syscall.SIGKILL)
			}
			ch <- ws
			return
		}
	}()
	return ch, nil
}

// InitReaper is the Reaper of PID 1: the one place in the agent that waits
// for children. It waits for any child (wait4(-1)), hands the status of a
// process started through Start to its channel, and discards the status
// of every other child, the orphans the kernel reparents to PID 1. Start
// holds the reaper's lock while the process is forked and registered, and
// each reaped pid is dispatched under the same lock, so a process that
// exits before Start returns is still delivered.
//
// Nothing else in the process may wait for children while an InitReaper
// runs: not os/exec's Wait, and not initsys.StartReaper, whose job this
// takes over.
type InitReaper struct {
	mu     sync.Mutex
	owners map[int]chan syscall.WaitStatus
}

var _ Reaper = (*InitReaper)(nil)

// NewInitReaper returns a reaper; call Run (or Reap) to make it reap.
func NewInitReaper() *InitReaper {
	return &InitReaper{owners: map[int]chan syscall.WaitStatus{}}
}

// Start implements Reaper.
func (r *InitReaper) Start(start func() (int, error)) (<-chan syscall.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := start()
	if err != nil {
		return nil, err
	}
	ch := make(chan syscall.WaitStatus, 1)
	r.owners[pid] = ch
	return ch, nil
}

// Reap collects every child that has exited, without blocking, delivers
// the statuses of registered ones, and returns how many children it
// collected.
func (r *InitReaper) Reap() int {
	n := 0
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return n
		}
		n++
		r.mu.Lock()
		ch, ok := r.owners[pid]
		delete(r.owners, pid)
		r.mu.Unlock()
		if ok {
			ch <- ws
		}
	}
}

// Run reaps whenever SIGCHLD arrives, and every poll interval in case
// signals were merged, until ctx ends.
func (r *InitReaper) Run(ctx context.Context, poll time.Duration) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		r.Reap()
		select {
		case <-ctx.Done():
			return
		case <-sigs:
		case <-t.C:
		}
	}
}
