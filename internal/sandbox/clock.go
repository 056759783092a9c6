package sandbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

// The guest's clock after the host sleeps.
//
// A guest's clock runs on the machine's own time source, which stops
// while the host is suspended (a laptop's lid closed): after the host
// wakes, the guest's clock is behind by the time it slept, and a guest
// has no time service of its own to notice. The host does notice: its
// wall clock moved on while its monotonic clock did not (Linux's
// CLOCK_MONOTONIC and macOS's mach_absolute_time both stop in suspend).
// So while a sandbox runs, its host compares the two every
// DefaultClockCheck; when their difference has changed by more than
// clockSlack since it last looked — the host slept, or its own clock was
// stepped — it sets the guest's clock to the host's again, with the
// configure request that sets it after a warm start (Identity's
// TimeUnixNano, re-sent with the rest of the sandbox's configuration,
// which it leaves as it is).
const (
	// DefaultClockCheck is how often a running sandbox's host checks
	// whether it slept (Options.ClockCheck).
	DefaultClockCheck = 10 * time.Second
	// clockSlack is how far the host's wall clock may move against its
	// monotonic clock before the guest's clock is set again.
	clockSlack = time.Second
	// clockTimeout bounds one request setting the guest's clock.
	clockTimeout = 30 * time.Second
)

// wallDrift returns a function reporting how far the host's wall clock
// has moved, since it was made, beyond its monotonic clock: the time the
// host was suspended, plus any step of its wall clock.
func wallDrift() func() time.Duration {
	start := time.Now()
	return func() time.Duration {
		now := time.Now()
		return now.Round(0).Sub(start.Round(0)) - now.Sub(start)
	}
}

// keepClock calls set whenever drift says the host slept or its clock
// was stepped, checking every interval, until done is closed. A set that
// fails is tried again at the next check, and reported to log.
func keepClock(done <-chan struct{}, every time.Duration, drift func() time.Duration, set func() error, log func(error)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	last := drift()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		d := drift()
		if jump := d - last; jump < clockSlack && jump > -clockSlack {
			continue
		}
		if err := set(); err != nil {
			log(err)
			continue
		}
		last = d
	}
}

// keepClock keeps the guest's clock the host's (keepClock above).
func (s *Sandbox) keepClock(every time.Duration, drift func() time.Duration, log *slog.Logger) {
	keepClock(s.done, every, drift, s.setClock, func(err error) {
		if log != nil {
			log.Warn("setting the guest's clock after the host's moved", "sandbox", s.spec.Name, "err", err)
		}
	})
}

// setClock tells the guest the host's time, with the sandbox's
// configuration as it stands (so nothing else changes).
func (s *Sandbox) setClock() error {
	s.updating.Lock()
	defer s.updating.Unlock()
	s.mu.Lock()
	configure := s.configure
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), clockTimeout)
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	c := s.Configure()
	c.Identity = &agentproto.Identity{TimeUnixNano: time.Now().UnixNano()}
	return configure(ctx, c)
}
