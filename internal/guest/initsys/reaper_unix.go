//go:build unix

package initsys

import (
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Reap collects every child process that has exited, without blocking,
// and returns how many it collected. PID 1 inherits every orphaned
// process, and each one that exits stays a zombie until PID 1 waits for
// it.
//
// Reap waits for any child, so it also collects children started with
// os/exec, whose Wait then fails: a process that runs commands of its
// own must wait for them through the same loop.
func Reap() int {
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
	}
}

// StartReaper reaps children (see Reap) whenever SIGCHLD arrives, and
// every poll interval in case signals were merged, until stop is called.
// stop waits for the reaping goroutine to end.
func StartReaper(poll time.Duration) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			Reap()
			select {
			case <-done:
				return
			case <-sigs:
			case <-t.C:
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		<-finished
	}
}
