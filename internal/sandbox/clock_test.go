package sandbox

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The host's drift between its wall and monotonic clocks moves when it
// sleeps: each move of a second or more sets the guest's clock once, a
// smaller one does not, and a set that fails is tried again.
func TestKeepClock(t *testing.T) {
	var drift atomic.Int64
	var mu sync.Mutex
	sets, failing := 0, false
	set := func() error {
		mu.Lock()
		defer mu.Unlock()
		sets++
		if failing {
			return errors.New("the guest did not answer")
		}
		return nil
	}
	var logged atomic.Int32
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		keepClock(done, time.Millisecond, func() time.Duration { return time.Duration(drift.Load()) }, set, func(error) { logged.Add(1) })
		close(ended)
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return sets
	}
	// waitFor polls until the number of sets is n (bounded), then
	// checks it stays there.
	waitFor := func(n int) {
		t.Helper()
		for i := 0; i < 2000 && count() < n; i++ {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		if got := count(); got != n {
			t.Fatalf("the guest's clock was set %d times, want %d", got, n)
		}
	}
	waitFor(0)
	drift.Store(int64(900 * time.Millisecond)) // under a second: no set
	waitFor(0)
	drift.Store(int64(time.Hour)) // the host slept an hour
	waitFor(1)
	drift.Store(int64(time.Hour - 2*time.Second)) // its clock stepped back
	waitFor(2)

	mu.Lock()
	failing = true
	mu.Unlock()
	drift.Store(int64(2 * time.Hour))
	for i := 0; i < 2000 && count() < 5; i++ {
		time.Sleep(time.Millisecond)
	}
	if count() < 5 || logged.Load() < 3 {
		t.Fatalf("a failing set was tried %d times in all (%d logged), want it tried again at each check", count(), logged.Load())
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	n := count()
	waitFor(n) // set once it worked, then no more
	close(done)
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("keepClock did not end with the sandbox")
	}
}

// The real drift is near zero while the host stays awake.
func TestWallDrift(t *testing.T) {
	d := wallDrift()
	time.Sleep(10 * time.Millisecond)
	if got := d(); got > clockSlack/10 || got < -clockSlack/10 {
		t.Errorf("drift of an awake host: %v", got)
	}
}
