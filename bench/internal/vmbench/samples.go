package vmbench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sbx-dev/sbx/internal/machine/qemu"
)

// Samples are the durations one measurement took, in the order taken.
type Samples []time.Duration

func (s Samples) sorted() []time.Duration {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// Min returns the shortest sample, or 0 for none.
func (s Samples) Min() time.Duration {
	if len(s) == 0 {
		return 0
	}
	return slices.Min(s)
}

// Max returns the longest sample, or 0 for none.
func (s Samples) Max() time.Duration {
	if len(s) == 0 {
		return 0
	}
	return slices.Max(s)
}

// Median returns the middle sample, or the mean of the two middle ones;
// 0 for none.
func (s Samples) Median() time.Duration {
	c := s.sorted()
	switch n := len(c); {
	case n == 0:
		return 0
	case n%2 == 1:
		return c[n/2]
	default:
		return (c[n/2-1] + c[n/2]) / 2
	}
}

// Percentile returns the nearest-rank p-th percentile: the smallest
// sample at least p per cent of the samples are no greater than.
func (s Samples) Percentile(p float64) time.Duration {
	c := s.sorted()
	if len(c) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(c))))
	return c[min(max(rank, 1), len(c))-1]
}

// List formats every sample with f, in the order taken.
func (s Samples) List(f func(time.Duration) string) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = f(d)
	}
	return strings.Join(parts, ", ")
}

// Seconds formats d in seconds with two decimals.
func Seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// Millis formats d in milliseconds with one decimal.
func Millis(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// MBps is a throughput in MB (10^6 bytes) per second; 0 for no time.
func MBps(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / 1e6 / d.Seconds()
}

// PerSecond is a rate; 0 for no time.
func PerSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Ratio returns a ÷ b as "0.85×", or "n/a" when either is not positive.
func Ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// Size names a byte count in the largest binary unit that divides it.
func Size(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// QEMU names the emulator and accelerator a run used, as the reports'
// first line does: "QEMU 10.0.2 (/usr/bin/qemu-system-x86_64),
// accelerator tcg", with the host's note on acceleration after it.
func QEMU(host qemu.Host, bin qemu.Binary) string {
	s := fmt.Sprintf("QEMU %s (%s), accelerator %s", bin.Version, bin.Path, host.Accel("amd64"))
	if host.Note != "" {
		s += fmt.Sprintf(" (%s)", host.Note)
	}
	return s
}

// Of returns samples of the given numbers of seconds, as the reports'
// tests write them.
func Of(seconds ...float64) Samples {
	out := make(Samples, len(seconds))
	for i, x := range seconds {
		out[i] = time.Duration(x * float64(time.Second))
	}
	return out
}
