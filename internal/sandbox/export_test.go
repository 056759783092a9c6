package sandbox

import "time"

// SetClockDrift makes a sandbox started with o read the host's drift
// between its wall and monotonic clocks from f (clock.go), so a test can
// say the host slept.
func SetClockDrift(o *Options, f func() time.Duration) { o.clockDrift = f }
