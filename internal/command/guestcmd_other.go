//go:build !unix

package command

import "github.com/sbx-dev/sbx/internal/guestconn"

// forwardResizes does nothing where there is no SIGWINCH: the guest's
// terminal keeps the size it started with.
func forwardResizes(int, *guestconn.Cmd) (stop func()) { return func() {} }
