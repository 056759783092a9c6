package execsrv_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/guest/execsrv"
	"github.com/sbx-dev/sbx/internal/guestconn"
)

// TestInitReaper runs the server the way PID 1 does: one reaper waits for
// every child, hands the server the statuses of its processes and
// discards the others'.
func TestInitReaper(t *testing.T) {
	r := execsrv.NewInitReaper()
	ctx, cancel := context.WithCancel(context.Background())
	reaping := make(chan struct{})
	go func() {
		defer close(reaping)
		r.Run(ctx, 50*time.Millisecond)
	}()
	defer func() {
		cancel()
		<-reaping
	}()
	c := serve(t, execsrv.Options{Reaper: r})

	// Processes that exit at once, many at a time: each status reaches
	// its own session however the reaping interleaves with the starts.
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			st, err := c.Exec(context.Background(), guestconn.Cmd{Args: sh(fmt.Sprintf("exit %d", i))})
			if err != nil || st.Code != i {
				t.Errorf("exit %d: %v %v", i, st, err)
			}
		})
	}
	wg.Wait()
	p, err := c.Start(context.Background(), guestconn.Cmd{Args: []string{"sleep", "100"}})
	if err != nil {
		t.Fatal(err)
	}
	p.Signal("SIGTERM")
	if st, err := p.Wait(); err != nil || st.Signal != "SIGTERM" {
		t.Errorf("killed process: %v %v", st, err)
	}

	// A child nobody registered, as an orphan is, is reaped and
	// dropped.
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	for range 200 {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, fs.ErrNotExist) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("unregistered child %d was not reaped", pid)
}
