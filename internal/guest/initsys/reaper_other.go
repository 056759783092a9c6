//go:build !unix

package initsys

import "time"

// Reap does nothing where there are no Unix processes to reap.
func Reap() int { return 0 }

// StartReaper does nothing where there are no Unix processes to reap.
func StartReaper(poll time.Duration) (stop func()) { return func() {} }
