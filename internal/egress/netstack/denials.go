package netstack

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Denial is one thing the network refused, for the audit log.
type Denial struct {
	Time time.Time
	// Proto is "tcp", "udp", "dns" or "ip" (a packet refused below the
	// transport: a forged source, a fragment, ICMP to anything but the
	// gateway, another IP protocol).
	Proto string
	// Name is the name the guest asked for or the name behind the
	// synthetic address it connected to; empty when there is none.
	Name string
	// Dst is the destination address and port the guest used (the port is
	// 0 where there is none).
	Dst netip.AddrPort
	// Reason says in one line why.
	Reason string
}

// denials hands Denials to Options.Deny from one goroutine of its own, so
// that a slow audit sink never stalls the stack: the stack only ever
// queues, and what does not fit the queue or the rate is counted and
// dropped.
type denials struct {
	deny    func(Denial)
	rate    *bucket
	q       chan Denial
	dropped atomic.Uint64
	done    chan struct{}

	mu     sync.RWMutex
	closed bool
}

func newDenials(deny func(Denial), rate, queue int) *denials {
	d := &denials{deny: deny, rate: newBucket(rate, rate), done: make(chan struct{})}
	if deny == nil {
		close(d.done)
		return d
	}
	d.q = make(chan Denial, queue)
	go d.run()
	return d
}

func (d *denials) run() {
	defer close(d.done)
	for x := range d.q {
		d.deny(x)
	}
}

// report queues x; it never blocks.
func (d *denials) report(x Denial) {
	if d.q == nil {
		return
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return
	}
	if x.Time.IsZero() {
		x.Time = time.Now()
	}
	if !d.rate.take(x.Time) {
		d.dropped.Add(1)
		return
	}
	select {
	case d.q <- x:
	default:
		d.dropped.Add(1)
	}
}

// close stops taking Denials and waits, at most wait, for the queued ones
// to be handed over.
func (d *denials) close(wait time.Duration) {
	d.mu.Lock()
	if !d.closed && d.q != nil {
		close(d.q)
	}
	d.closed = true
	d.mu.Unlock()
	select {
	case <-d.done:
	case <-time.After(wait):
	}
}
