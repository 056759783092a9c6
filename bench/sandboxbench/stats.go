package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// samples are the durations one measurement took, in the order taken.
type samples []time.Duration

func (s samples) sorted() []time.Duration {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// min returns the shortest sample, or 0 for none.
func (s samples) min() time.Duration {
	if len(s) == 0 {
		return 0
	}
	return slices.Min(s)
}

// median returns the middle sample, or the mean of the two middle ones.
func (s samples) median() time.Duration {
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

// percentile returns the nearest-rank p-th percentile: the smallest
// sample at least p per cent of the samples are no greater than.
func (s samples) percentile(p float64) time.Duration {
	c := s.sorted()
	if len(c) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(c))))
	return c[min(max(rank, 1), len(c))-1]
}

// ratio returns a/b as "1.23×", or "n/a" when b is zero.
func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", float64(a)/float64(b))
}

// seconds formats d in seconds with two decimals.
func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// millis formats d in milliseconds with one decimal.
func millis(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// mib formats a byte count in MiB with one decimal.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// list formats every sample with f, in the order taken.
func (s samples) list(f func(time.Duration) string) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = f(d)
	}
	return strings.Join(parts, ", ")
}
