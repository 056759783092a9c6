// Package ctxiotest gives tests a context that is cancelled at a chosen
// point of the work that consults it, so that "Ctrl-C in the middle of a
// write" is an event in a known place rather than a timer that may fire
// before the work starts or after it ends.
//
// Code written with package ctxio asks the context for its error before
// every read and write; CancelAt(n) cancels at the n-th such question,
// which falls between two writes of a build in progress. A first run
// with CancelAt(0) (never) counts the questions a whole build asks.
//
// It is test support, imported only by tests.
package ctxiotest

import (
	"context"
	"sync"
)

// Context cancels itself the n-th time its Err method is called.
type Context struct {
	context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	n     int
	calls int
}

// CancelAt returns a context that is cancelled at the n-th call of Err,
// or never when n is 0. Call Stop when done with it.
func CancelAt(n int) *Context {
	ctx, cancel := context.WithCancel(context.Background())
	return &Context{Context: ctx, cancel: cancel, n: n}
}

// Err counts the call, cancels the context at the n-th, and returns the
// context's error.
func (c *Context) Err() error {
	c.mu.Lock()
	c.calls++
	if c.calls == c.n {
		c.cancel()
	}
	c.mu.Unlock()
	return c.Context.Err()
}

// Calls is how many times Err has been called.
func (c *Context) Calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// Stop releases the context.
func (c *Context) Stop() { c.cancel() }
