//go:build unix

package command

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/sbx-dev/sbx/internal/guestconn"
)

// forwardResizes sends the size of the terminal fd to cmd's process on
// every SIGWINCH, from when the process starts (cmd.Started hands it
// over) until stop is called. A SIGWINCH that comes before the process
// runs is sent once it does. stop returns once nothing listens any more.
func forwardResizes(fd int, cmd *guestconn.Cmd) (stop func()) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	started := make(chan *guestconn.Process, 1)
	next := cmd.Started
	cmd.Started = func(p *guestconn.Process) {
		started <- p
		if next != nil {
			next(p)
		}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var p *guestconn.Process
		pending := false
		for {
			select {
			case <-done:
				return
			case p = <-started:
				if !pending {
					continue
				}
			case <-winch:
				if p == nil {
					pending = true
					continue
				}
			}
			pending = false
			if rows, cols, ok := terminalSize(fd); ok {
				// An error means the process has ended or the
				// connection is gone; the runner's wait reports the
				// latter.
				_ = p.Resize(rows, cols)
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		close(done)
		<-finished
	}
}
