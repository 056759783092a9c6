package netstack

import (
	"sync"
	"time"
)

// bucket is a token bucket: rate tokens a second, at most burst saved
// up. A guest can send as fast as its vCPU goes; whatever a packet costs
// the host beyond the stack itself (a DNS answer, an audit line) is taken
// from a bucket so that the cost has a ceiling.
type bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newBucket(rate, burst int) *bucket {
	return &bucket{rate: float64(rate), burst: float64(burst), tokens: float64(burst)}
}

// take takes a token if there is one.
func (b *bucket) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
